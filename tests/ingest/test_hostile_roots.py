"""Hostile data roots: entries that are not what their names say are skipped and reported
(a warning and an ingest_errors row each), and a valid line far larger than the seeds' lands.

One root in the docs/data-roots.md layout, ingested once:
- `round_1/b__1.jsonl` is a symlink to `round_1/a__1.jsonl`: a second name for one file;
- `round_x/` looks like a round directory but is not numbered;
- `round_1/up` and `round_1/here` are directory links back to the run and to the round;
- `round_2/huge__1.jsonl` holds one valid 50 MB node line (1.8 M token ids and logprobs)
  between two small ones; the run's arm (hr24k_u6, cap 24576) comes from a manifest.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ingest.pipeline import ingest_roots
from tests.ingest.helpers import make_db, rows

CASES = Path(__file__).parent / "cases" / "bad_lines"
RUN = "20260101_000000_hostile"
HUGE_TOKENS = 1_800_000


def _record(node_id: str, tokens: int = 3) -> dict:
    rec = json.loads((CASES / "blank_lines.jsonl").read_text().splitlines()[0])
    rec["id"] = node_id
    rec["response_token_ids"] = [(i * 7919) % 151_643 for i in range(tokens)]
    rec["response_logprobs"] = [-((i % 997) + 0.5) / 997.3 for i in range(tokens)]
    return rec


def _write_jsonl(path: Path, records: list[dict]) -> None:
    with open(path, "w") as fh:
        for rec in records:
            fh.write(json.dumps(rec) + "\n")


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    run = tmp / "root" / RUN
    (run / "round_1").mkdir(parents=True)
    _write_jsonl(run / "round_1" / "a__1.jsonl", [_record("00000000000a"), _record("00000000000b")])
    os.symlink("a__1.jsonl", run / "round_1" / "b__1.jsonl")
    (run / "round_x").mkdir()
    _write_jsonl(run / "round_x" / "c__1.jsonl", [_record("00000000000c")])
    os.symlink("..", run / "round_1" / "up")
    os.symlink(".", run / "round_1" / "here")
    (run / "round_2").mkdir()
    _write_jsonl(run / "round_2" / "huge__1.jsonl",
                 [_record("000000000001"), _record("000000000002", HUGE_TOKENS), _record("000000000003")])
    manifest = tmp / "manifest.toml"
    manifest.write_text(f'[runs."{RUN}"]\narm = "hr24k_u6"\nkind = "training"\n')
    url = make_db(tmp)
    report = ingest_roots(url, [tmp / "root"], [manifest])
    return url, report, run


def _skipped(url: str) -> dict:
    return dict(rows(url, "SELECT s.path, e.reason FROM ingest_errors e JOIN sources s USING (source_id) "
                          "WHERE e.line_no = 0 AND s.kind = 'skipped'"))


def test_a_symlink_to_another_node_file_is_skipped_and_reported(ingested):
    url, report, run = ingested
    assert rows(url, "SELECT task, count(*) FROM nodes WHERE round = 1 GROUP BY 1") == [("a", 2)]
    link = str(run / "round_1" / "b__1.jsonl")
    assert _skipped(url)[link] == (f"skipped: a symlink to {run / 'round_1' / 'a__1.jsonl'}, which is "
                                   "ingested under its own name; this name is skipped")
    assert any(w.startswith(f"skipped {link}: a symlink to") for w in report.warnings)


def test_a_round_directory_without_a_number_is_reported(ingested):
    url, report, run = ingested
    path = str(run / "round_x")
    assert "not a round directory: expected round_<N>" in _skipped(url)[path]
    assert any(w.startswith(f"skipped {path}: not a round directory") for w in report.warnings)
    assert rows(url, "SELECT count(*) FROM nodes WHERE task = 'c'") == [(0,)]


def test_directory_symlink_cycles_inside_a_round_are_reported(ingested):
    url, report, run = ingested
    skipped = _skipped(url)
    for name, target in (("up", run), ("here", run / "round_1")):
        path = str(run / "round_1" / name)
        assert skipped[path] == (f"skipped: directory symlink cycle: it points back at {target}, the "
                                 "round or a directory above it; not followed")
        assert any(w.startswith(f"skipped {path}: directory symlink cycle") for w in report.warnings)


def test_skipped_entries_are_warnings_not_failures_and_a_rerun_changes_nothing(ingested, tmp_path):
    url, report, run = ingested
    assert report.files_failed == 0 and report.exit_code == 0 and not report.errors
    assert report.entries_skipped == 4  # b__1.jsonl, round_x, up, here
    before = rows(url, "SELECT path, reason FROM ingest_errors ORDER BY ALL")
    again = ingest_roots(url, [run.parent], [run.parent.parent / "manifest.toml"])
    assert again.files_loaded == 0 and again.exit_code == 0
    assert rows(url, "SELECT path, reason FROM ingest_errors ORDER BY ALL") == before


def test_a_valid_50_mb_line_lands_and_invariant_4_reports_the_cap(ingested):
    url, _, run = ingested
    assert (run / "round_2" / "huge__1.jsonl").stat().st_size > 50_000_000
    assert rows(url, "SELECT line_no, n_response_tokens FROM nodes WHERE task = 'huge' ORDER BY 1") == [
        (1, 3), (2, HUGE_TOKENS), (3, 3)]
    (ids, logprobs), = rows(url, "SELECT len(p.response_token_ids), len(p.response_logprobs) FROM nodes n "
                                 "JOIN node_payloads p USING (source_id, line_no) WHERE n.node_id = '000000000002'")
    assert ids == logprobs == HUGE_TOKENS
    assert rows(url, "SELECT check_no, node_id, detail FROM invariant_violations WHERE check_no = 4") == [
        (4, "000000000002", f"{HUGE_TOKENS} response tokens exceed the arm's cap 24576 at "
                            f"{run / 'round_2' / 'huge__1.jsonl'}:2")]
