"""Raw JSON text per line: the relation every normalization reads (`_raw`).

A file's bytes are split here (BOM and CRLF stripped and noted, non-UTF-8 and oversized
lines turned into per-line errors); the trainer's dicts become lines with `json.dumps`.
Both end as an Arrow table `(line_no, line, pre_error)` registered on the connection.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

BOM = b"\xef\xbb\xbf"
MAX_LINE_BYTES = 256 * 1024 * 1024  # a line over this is rejected (bounds memory; a 50 MB line of 1.8 M token ids lands)


@dataclass
class RawLines:
    line_nos: list[int] = field(default_factory=list)
    lines: list[str | None] = field(default_factory=list)
    pre_errors: list[str | None] = field(default_factory=list)
    notes: dict[int, str] = field(default_factory=dict)  # kept rows worth a word (BOM, CRLF)

    def add(self, line_no: int, line: str | None, error: str | None = None) -> None:
        self.line_nos.append(line_no)
        self.lines.append(line)
        self.pre_errors.append(error)

    def arrow(self, key: int = 0):
        import pyarrow as pa

        return pa.table({
            "key": pa.array([key] * len(self.line_nos), pa.int32()),
            "line_no": pa.array(self.line_nos, pa.int32()),
            "line": pa.array(self.lines, pa.string()),
            "pre_error": pa.array(self.pre_errors, pa.string()),
        })


@dataclass
class CleanLines:
    """The lines of a clean file as one Arrow column over the file's bytes (no per-line work).

    Clean: UTF-8, no BOM, no CR, every non-empty line starts with `{` and fits the limit.
    Then the lines are exactly what `split_lines`' careful path would give, so a file takes
    the careful path only when one of its lines needs it.
    """

    line_nos: object    # numpy int32 array, the 1-based number of each non-empty line
    column: object      # pyarrow StringArray of the lines, newlines removed
    notes: dict[int, str] = field(default_factory=dict)

    def arrow(self, key: int = 0):
        # Built from buffers: pa.array() and pa.table(dict) import pandas (~0.5 s per process,
        # a quarter of a small root's ingest), to check whether their input is a DataFrame.
        import numpy as np
        import pyarrow as pa

        n = len(self.line_nos)
        return pa.Table.from_arrays(
            [_int32(np.full(n, key, np.int32)), _int32(np.asarray(self.line_nos, np.int32)),
             self.column, pa.nulls(n, pa.string())],
            names=["key", "line_no", "line", "pre_error"])


def _int32(values):
    import pyarrow as pa

    return pa.Array.from_buffers(pa.int32(), len(values), [None, pa.py_buffer(values)])


def clean_lines(data: bytes, max_line_bytes: int = MAX_LINE_BYTES) -> CleanLines | None:
    """`data` as CleanLines, or None when some line needs `split_lines`' careful path."""
    import numpy as np
    import pyarrow as pa

    if data.startswith(BOM) or b"\r" in data or len(data) >= 2**31:
        return None
    raw = np.frombuffer(data, np.uint8)
    starts = np.concatenate(([0], np.flatnonzero(raw == 10) + 1))  # of each "\n"-piece
    lengths = np.diff(np.append(starts, len(data) + 1)) - 1
    kept = lengths > 0  # empty pieces are blank lines: skipped, as the careful path does
    if (lengths > max_line_bytes).any() or (raw[starts[kept]] != ord("{")).any():
        return None
    compact = data.replace(b"\n", b"")
    # A piece's start in `compact` is its start in `data` less the newlines before it; empty
    # pieces add no bytes, so the kept pieces stay contiguous there.
    offsets = np.append((starts - np.arange(len(starts)))[kept], len(compact)).astype(np.int32)
    column = pa.StringArray.from_buffers(int(kept.sum()), pa.py_buffer(offsets),
                                         pa.py_buffer(compact))
    try:
        column.validate(full=True)  # UTF-8
    except pa.ArrowInvalid:
        return None
    return CleanLines((np.flatnonzero(kept) + 1).astype(np.int32), column)


def split_lines(data: bytes, max_line_bytes: int = MAX_LINE_BYTES) -> RawLines | CleanLines:
    """One entry per non-blank line, numbered from 1 as an editor numbers them."""
    fast = clean_lines(data, max_line_bytes)
    if fast is not None:
        return fast
    out = RawLines()
    if data.startswith(BOM):
        data = data[len(BOM):]
        out.notes[1] = "kept: UTF-8 byte-order mark at the start of the file (stripped)"
    try:
        text_lines = data.decode("utf-8").split("\n")
        _add_text_lines(out, text_lines, max_line_bytes)
    except UnicodeDecodeError:
        _add_byte_lines(out, data.split(b"\n"), max_line_bytes)
    return out


def _add_text_lines(out: RawLines, text_lines: list[str], max_line_bytes: int) -> None:
    crlf_line = None
    for no, line in enumerate(text_lines, start=1):
        if line.endswith("\r"):
            line = line[:-1]
            crlf_line = crlf_line or no
        if not line.strip():
            continue
        if len(line) > max_line_bytes // 4 and len(line.encode("utf-8")) > max_line_bytes:
            out.add(no, None, _too_long(len(line.encode("utf-8")), max_line_bytes))
        else:
            out.add(no, line)
    _note_crlf(out, crlf_line)


def _add_byte_lines(out: RawLines, byte_lines: list[bytes], max_line_bytes: int) -> None:
    crlf_line = None
    for no, raw in enumerate(byte_lines, start=1):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
            crlf_line = crlf_line or no
        if not raw.strip():
            continue
        if len(raw) > max_line_bytes:
            out.add(no, None, _too_long(len(raw), max_line_bytes))
            continue
        try:
            out.add(no, raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            out.add(no, None, f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}")
    _note_crlf(out, crlf_line)


def _note_crlf(out: RawLines, crlf_line: int | None) -> None:
    if crlf_line is not None:
        note = "kept: CRLF (Windows) line endings (stripped)"
        out.notes[crlf_line] = "; ".join(filter(None, [out.notes.get(crlf_line), note]))


def _too_long(size: int, limit: int) -> str:
    return (f"line is {size / 1e6:.1f} MB, over the {limit / 2**20:.0f} MiB line limit "
            "(raise it with --max-line-mb)")


def records_to_lines(records: list[dict]) -> RawLines:
    """The trainer's dicts as lines, numbered from 1 in list order."""
    out = RawLines()
    for no, rec in enumerate(records, start=1):
        out.add(no, json.dumps(rec, ensure_ascii=False))
    return out


def whole_text(data: bytes) -> RawLines:
    """A one-object JSON file (a summary, a W&B config) as a single line numbered 1."""
    out = RawLines()
    if data.startswith(BOM):
        data = data[len(BOM):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        out.add(1, None, f"not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}")
        return out
    if text.strip():
        out.add(1, text.replace("\r\n", "\n"))
    else:
        out.add(1, None, "empty file, expected one JSON object")
    return out


def explain_json_error(text: str | None) -> str | None:
    """A precise reason for a line DuckDB called invalid (truncated, NaN, ...); rare path."""
    if text is None:
        return None
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()):
            return f"truncated JSON (ends at column {exc.pos} mid-value)"
        return f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except RecursionError:
        return "not valid JSON: nested too deeply"
    return None
