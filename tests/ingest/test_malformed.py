"""Bad input never loses good data: every malformed case gets its ingest_errors row.

Golden cases: `cases/bad_lines/<case>.jsonl` with `cases/bad_lines/EXPECTED.toml`. All cases go
into one root (one task per case) and are ingested once; then each case is checked.
"""
from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

import pytest

from ingest.pipeline import ingest_roots
from tests.ingest.helpers import make_db, rows

CASES = Path(__file__).parent / "cases" / "bad_lines"
EXPECTED = tomllib.loads((CASES / "EXPECTED.toml").read_text())
RUN = "20260101_000000_cases"
LINE_LIMIT = 32 * 2**20  # --max-line-mb 32: the planted 50 MB line is over it (the default lands it)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad")
    round_dir = tmp / "root" / RUN / "round_1"
    round_dir.mkdir(parents=True)
    for case in EXPECTED:
        shutil.copy(CASES / f"{case}.jsonl", round_dir / f"{case}__1.jsonl")
    _plant_file_level_problems(tmp / "root")
    url = make_db(tmp)
    report = ingest_roots(url, [tmp / "root"], max_line_bytes=LINE_LIMIT)
    return url, report, tmp / "root"


def _plant_file_level_problems(root: Path) -> None:
    run = root / RUN
    (run / "round_1" / "broken__summary_1.json").write_text('{"nodes": 3, "valid": ')
    (run / "round_1" / "broken__1.jsonl").write_text("")
    (run / "timing.jsonl").write_text(
        '{"step": 1, "total_s": 10.0, "phases_s": {"gen": 10.0}}\n'
        '{"step": 2, "total_s": \n'
        '{"step": "three", "total_s": 5.0, "phases_s": {}}\n'
        '{"step": 4, "total_s": 9.0, "phases_s": {"gen": 9.0, "save_checkpoint": 0.5}}\n')
    os.symlink("loop_run", root / "loop_run")  # a symlink loop
    os.symlink("/nonexistent/file.jsonl", run / "round_1" / "gone__1.jsonl")
    big = run / "round_2"
    big.mkdir()
    with open(big / "huge__1.jsonl", "w") as fh:  # a 50 MB line (over LINE_LIMIT) between two good ones
        good = (CASES / "blank_lines.jsonl").read_text().splitlines()[0]
        fh.write(good + "\n" + '{"id": "' + "x" * 50_000_000 + '"}\n')
        fh.write(good.replace("000000000001", "000000000009") + "\n")


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_bad_line_case(ingested, case):
    url, _, root = ingested
    expected = EXPECTED[case]
    assert rows(url, "SELECT count(*) FROM nodes WHERE task = ?", [case]) == [(expected["landed"],)]
    got = dict(rows(url, "SELECT e.line_no, e.reason FROM ingest_errors e JOIN sources s "
                         "USING (source_id) WHERE s.task = ? AND s.kind = 'nodes'", [case]))
    assert sorted(got) == sorted(int(k) for k in expected["errors"])
    for line_no, fragment in expected["errors"].items():
        for part in fragment.split("; "):
            assert part in got[int(line_no)], (case, line_no, got[int(line_no)])
    # every good line of the file landed, with its line number
    good = set()
    for no, line in enumerate((CASES / f"{case}.jsonl").read_bytes().split(b"\n"), start=1):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and "id" in rec and no not in {
                int(k) for k, v in expected["errors"].items() if not v.startswith("kept")}:
            good.add(no)
    landed = {no for (no,) in rows(url, "SELECT line_no FROM nodes WHERE task = ?", [case])}
    assert landed == good


def test_unknown_keys_are_kept_in_extra(ingested):
    url, _, _ = ingested
    (extra,) = rows(url, "SELECT extra FROM nodes WHERE task = 'unknown_keys' AND line_no = 1")[0]
    assert json.loads(extra) == {"new_field": {"a": 1}, "medal": False}


def test_broken_summary_is_reported_and_its_task_round_kept(ingested):
    url, _, _ = ingested
    reason = rows(url, "SELECT e.reason FROM ingest_errors e JOIN sources s USING (source_id) "
                       "WHERE s.kind = 'summary'")
    assert len(reason) == 1 and "JSON" in reason[0][0]
    assert rows(url, "SELECT summary_present, node_file_present, nodes FROM task_rounds "
                     "WHERE task = 'broken'") == [(False, True, None)]


def test_broken_timing_lines_are_rejected_and_the_rest_lands(ingested):
    url, _, _ = ingested
    assert rows(url, "SELECT step, save_checkpoint_s FROM steps ORDER BY step") == [
        (1, None), (4, 0.5)]
    errors = dict(rows(url, "SELECT e.line_no, e.reason FROM ingest_errors e "
                            "JOIN sources s USING (source_id) WHERE s.kind = 'timing'"))
    assert sorted(errors) == [2, 3]
    assert "truncated" in errors[2] and "step is varchar" in errors[3]


def test_file_level_problems_are_rows_not_crashes(ingested):
    url, report, root = ingested
    errors = dict(rows(url, "SELECT s.path, e.reason FROM ingest_errors e "
                            "JOIN sources s USING (source_id) WHERE e.line_no = 0"))
    assert "symlink loop" in errors[str(root / "loop_run")]
    assert "dangling symlink" in errors[str(root / RUN / "round_1" / "gone__1.jsonl")]
    assert report.exit_code == 3


def test_a_line_over_the_line_limit_is_rejected_and_its_neighbours_land(ingested):
    url, _, _ = ingested
    assert rows(url, "SELECT line_no FROM nodes WHERE task = 'huge' ORDER BY 1") == [(1,), (3,)]
    reason = rows(url, "SELECT e.reason FROM ingest_errors e JOIN sources s USING (source_id) "
                       "WHERE s.task = 'huge'")
    assert len(reason) == 1 and "line is 50.0 MB, over the 32 MiB line limit" in reason[0][0]


def test_empty_stub_file_creates_its_task_round(ingested):
    url, _, _ = ingested
    assert rows(url, "SELECT count(*) FROM nodes WHERE task = 'broken'") == [(0,)]
    assert rows(url, "SELECT rows, rows_rejected FROM sources WHERE task = 'broken' "
                     "AND kind = 'nodes'") == [(0, 0)]
