"""Ingest of reward-model run directories (docs/reward_model.md), with the tree-search roots'
guarantees: idempotent (a file whose content, and for a summary its receipt's, is unchanged
is skipped), each file fully in or fully out (one transaction per file), bad lines as
`ingest_errors` rows while the good ones land, a summary without a receipt lands as not
official with a warning, and a receipt that does not match its summary is reported (an
`ingest_errors` row, exit code 3) and not trusted.

The files are small (kilobytes), so each is read whole and parsed in Python, then written
through the record API of `ingest.rm_records`: a trainer's rows and a file's rows are made
by the same code.
"""
from __future__ import annotations

import json
from pathlib import Path

from ingest import rm_records
from ingest.rm_layout import receipt_path
from ingest.sources import content_hash
from warehouse.db import transaction

# Load order: the run's manifest first (runs row, reference), then the rest.
RM_KINDS = ("rm_manifest", "rm_jobs", "rm_outcome", "rm_artifacts", "rm_steps", "rm_evaluation")
LINE_WRITERS = {"rm_jobs": rm_records.write_jobs, "rm_artifacts": rm_records.write_artifacts,
                "rm_steps": rm_records.write_steps}


class _FileError(Exception):
    """The whole file is unusable (not JSON, not UTF-8): it lands as a failed source."""


def load_rm_files(walker, jobs) -> None:
    """Land every reward-model file of `jobs` (FileJobs of the RM_KINDS), kind by kind."""
    for kind in RM_KINDS:
        for job in (j for j in jobs if j.kind == kind):
            _load_one(walker, job)


def _load_one(walker, job) -> None:
    try:
        data = Path(job.path).read_bytes()
        receipt_bytes = _receipt_bytes(job) if job.kind == "rm_evaluation" else None
    except OSError as exc:
        walker.fail(job, f"unreadable: {exc.strerror or exc}")
        return
    digest = content_hash(data + b"\0" + (receipt_bytes if receipt_bytes is not None else b"-"))
    walker.report.bytes_read += len(data)
    prev = walker.known.get(job.path)
    if prev and prev[3] == digest and prev[5] is None:
        walker._skip(job, prev)
        return
    try:
        write = _writer(job, data, receipt_bytes)
    except _FileError as exc:
        walker.fail(job, str(exc))
        return
    _land(walker, job, digest, write)


def _land(walker, job, digest: str, write) -> None:
    con = walker.con

    def work():
        written = write(con)
        con.execute("UPDATE sources SET size_bytes = ?, mtime_ns = ?, content_hash = ? "
                    "WHERE source_id = ?", [job.size, job.mtime_ns, digest, written.source_id])
        return written

    try:
        written = transaction(con, work)
    except Exception as exc:  # noqa: BLE001 - a driver error fails this file, not the ingest
        walker.stop_on_disk_error(exc, job)  # a full disk fails the ingest: every file would fail
        walker.fail(job, f"could not load: {str(exc).strip().splitlines()[0]}")
        return
    walker.next_id = max(walker.next_id, written.source_id + 1)
    walker.known[job.path] = (written.source_id, job.size, job.mtime_ns, digest,
                              len(written.errors), None)
    walker.report.files_loaded += 1
    walker.report.rows += written.rows
    walker.report.rows_rejected += len(written.errors)
    for line_no, reason in sorted(written.errors.items())[:20]:
        where = job.path if line_no == 0 else f"{job.path}:{line_no}"
        walker.report.errors.append(f"{where}: {reason}")
    walker._tick(job, written.rows)


def _writer(job, data: bytes, receipt_bytes: bytes | None):
    """A function(con) -> Written that lands this file's content."""
    run_id, path = job.run_id, job.path
    if job.kind in LINE_WRITERS:
        numbered = _jsonl(data)
        records = [r for _, r in numbered]
        line_nos = [n for n, _ in numbered]
        return lambda con: LINE_WRITERS[job.kind](con, run_id, records, source_path=path,
                                                  line_nos=line_nos)
    obj = _json(data, "file")
    if job.kind == "rm_manifest":
        manifest = {**obj, "run_id": run_id} if isinstance(obj, dict) else {"run_id": run_id}
        if not isinstance(obj, dict):
            raise _FileError("manifest.json must hold one JSON object")
        return lambda con: rm_records.write_run(con, manifest, source_path=path,
                                                run_dir=str(Path(path).parent))
    if job.kind == "rm_outcome":
        phases = obj.get("phases") if isinstance(obj, dict) else None
        return lambda con: rm_records.write_budget(con, run_id, phases, source_path=path)
    if not isinstance(obj, dict):
        raise _FileError("an evaluation summary must hold one JSON object")
    summary, stem = obj, Path(path).stem
    if summary.setdefault("evaluation_id", stem) != stem:
        raise _FileError(f"evaluation_id {summary['evaluation_id']!r} differs from the file "
                         f"name's {stem!r}; rename the file or fix the field")
    receipt = _receipt(receipt_bytes)
    rpath = str(receipt_path(path))
    return lambda con: rm_records.write_evaluation(con, run_id, summary, receipt=receipt,
                                                   data=data, source_path=path,
                                                   receipt_path=rpath)


def _receipt_bytes(job) -> bytes | None:
    path = receipt_path(job.path)
    return path.read_bytes() if path.is_file() else None


def _receipt(data: bytes | None):
    """The parsed receipt; a receipt that is not JSON is kept as a string (a mismatch)."""
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return data.decode("utf-8", "replace")[:80]


def _json(data: bytes, what: str):
    try:
        return json.loads(data.decode("utf-8-sig"), parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise _FileError(f"not UTF-8 (byte {exc.start})") from None
    except ValueError as exc:
        raise _FileError(f"not valid JSON: {exc}") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _jsonl(data: bytes) -> list[tuple[int, object]]:
    """(line number, record or BadRecord) per non-blank line."""
    out = []
    for line_no, raw in enumerate(data.split(b"\n"), start=1):
        raw = raw.rstrip(b"\r")
        if line_no == 1:
            raw = raw.removeprefix(b"\xef\xbb\xbf")
        if not raw.strip():
            continue
        try:
            out.append((line_no, json.loads(raw.decode("utf-8"), parse_constant=_no_constant)))
        except UnicodeDecodeError as exc:
            out.append((line_no, rm_records.BadRecord(f"not UTF-8 (byte {exc.start})")))
        except ValueError as exc:
            out.append((line_no, rm_records.BadRecord(f"not valid JSON: {exc}")))
    return out


# --- what the report says after landing ---------------------------------------------------------

def rm_warnings(con, run_ids: list[str]) -> list[str]:
    """Missing receipts and the reward-model gate's findings for the runs just ingested."""
    if not run_ids:
        return []
    missing = con.execute(
        'SELECT "summary_path" FROM "rm_evaluations" WHERE list_contains(?, "run_id") '
        "AND \"receipt_status\" = 'missing' ORDER BY ALL", [run_ids]).fetchall()
    out = [f"{path}: no receipt ({receipt_path(path).name}): landed as not official"
           for (path,) in missing]
    findings = con.execute(
        'SELECT "check_no", "run_id", "job", "item", "detail" FROM "rm_violations" '
        'WHERE list_contains(?, "run_id") ORDER BY ALL', [run_ids]).fetchall()
    out += [f"run {run}: check {no} ({job or '-'} {item or ''}): {detail}"
            for no, run, job, item, detail in findings if no != 12 or "no receipt" not in detail]
    return out
