"""Splitting a file into lines: the fast path for clean files equals the careful path.

`split_lines` takes `clean_lines` (one Arrow column over the file's bytes) when every line is
clean, and the careful per-line path otherwise. Both must give the same relation, and a root
ingested either way must give the same warehouse, bad lines and their reasons included.
"""
from __future__ import annotations

import shutil

import pytest

from ingest import lines
from ingest.lines import CleanLines, RawLines, clean_lines, split_lines
from ingest.pipeline import ingest_roots
from tests.ingest.helpers import make_db, rows, table_dump
from tests.ingest.test_malformed import CASES, EXPECTED, RUN
from tests.ingest.test_pipeline import TABLES

GOOD = b'{"id": "a", "reward": 1.0}'
CLEAN = [b"", b"\n", GOOD, GOOD + b"\n", GOOD + b"\n\n\n" + GOOD, b"\n" + GOOD + b"\n\n",
         GOOD + b'\n{"id": "\xc3\xa9", "x": [1, 2]}\n', b"{trunc\n" + GOOD + b"\n{}\n"]
CAREFUL = [b"\xef\xbb\xbf" + GOOD, GOOD + b"\r\n" + GOOD, b" " + GOOD, GOOD + b"\n   \n",
           GOOD + b"\n[1, 2]\n", b'{"id": "\xe9"}\n' + GOOD, GOOD + b"\nnot json\n"]


def _careful(data: bytes, monkeypatch, max_line_bytes: int = lines.MAX_LINE_BYTES):
    with monkeypatch.context() as m:
        m.setattr(lines, "clean_lines", lambda *args: None)
        return lines.split_lines(data, max_line_bytes)


@pytest.mark.parametrize("data", CLEAN)
def test_clean_files_take_the_fast_path_and_give_the_same_lines(data, monkeypatch):
    fast = split_lines(data)
    careful = _careful(data, monkeypatch)
    assert isinstance(fast, CleanLines) and isinstance(careful, RawLines)
    assert fast.arrow(7).equals(careful.arrow(7))
    assert fast.arrow(7).column("line_no").to_pylist() == careful.line_nos
    assert fast.notes == careful.notes == {}


@pytest.mark.parametrize("data", CAREFUL)
def test_files_that_need_care_take_the_careful_path(data):
    assert clean_lines(data) is None
    assert isinstance(split_lines(data), RawLines)


def test_a_line_over_the_limit_takes_the_careful_path(monkeypatch):
    data = GOOD + b"\n" + b'{"id": "' + b"x" * 200 + b'"}\n' + GOOD
    assert clean_lines(data, 100) is None
    got = split_lines(data, 100)
    assert got.line_nos == [1, 2, 3] and got.lines[1] is None
    assert got.pre_errors[1].startswith("line is 0.0 MB, over the 0 MiB line limit")
    assert clean_lines(data, 1000) is not None


def _bad_root(tmp_path):
    round_dir = tmp_path / "root" / RUN / "round_1"
    round_dir.mkdir(parents=True)
    for case in EXPECTED:
        shutil.copy(CASES / f"{case}.jsonl", round_dir / f"{case}__1.jsonl")
    # one bad line among good ones in an otherwise clean file: the fast path takes the file
    good = (CASES / "blank_lines.jsonl").read_text().splitlines()[0]
    mixed = [good.replace("000000000001", f"00000000010{i}") for i in range(4)]
    mixed.insert(2, mixed[1][: len(mixed[1]) // 2])
    (round_dir / "mixed__1.jsonl").write_text("\n".join(mixed) + "\n")
    return tmp_path / "root"


def _dump(url):
    return {t: table_dump(url, t, drop=("ingested_at", "created_at")) for t in TABLES}


def test_fast_and_careful_paths_give_the_same_warehouse(tmp_path, monkeypatch):
    root = _bad_root(tmp_path)
    fast_url = make_db(tmp_path, "fast.duckdb")
    fast = ingest_roots(fast_url, [root])
    careful_url = make_db(tmp_path, "careful.duckdb")
    with monkeypatch.context() as m:
        m.setattr(lines, "clean_lines", lambda *args: None)
        careful = ingest_roots(careful_url, [root])
    assert _dump(fast_url) == _dump(careful_url)
    assert sorted(fast.errors) == sorted(careful.errors)
    assert (fast.rows, fast.rows_rejected) == (careful.rows, careful.rows_rejected)
    mixed = [e for e in fast.errors if "mixed__1.jsonl" in e]
    assert len(mixed) == 1 and ":3: not valid JSON: Unterminated string" in mixed[0]
    assert rows(fast_url, "SELECT line_no FROM nodes WHERE task = 'mixed' ORDER BY 1") == [
        (1,), (2,), (4,), (5,)]
