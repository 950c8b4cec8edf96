"""The trainer's record API lands rows exactly as the file path does."""
from __future__ import annotations

import json

import duckdb

from ingest.pipeline import ingest_roots
from ingest.records import load_steps, load_task_round, upsert_run
from tests.ingest.helpers import make_db, rows, table_dump

RUN = "20260719_045416_27b_mix4_hr"


def _task_files(sample_root):
    node_file = sorted((sample_root / RUN / "round_1").glob("aerial*__[0-9]*[0-9].jsonl"))[0]
    summary_file = sorted((sample_root / RUN / "round_1").glob("aerial*__summary_*.json"))[0]
    records = [json.loads(l) for l in node_file.read_text().splitlines()]
    return node_file, records, json.loads(summary_file.read_text())


def _copy_round(sample_root, dest):
    """A root holding only the one task-round file and summary (no tree, no transcript)."""
    node_file, records, summary = _task_files(sample_root)
    round_dir = dest / RUN / "round_1"
    round_dir.mkdir(parents=True)
    (round_dir / node_file.name).write_bytes(node_file.read_bytes())
    (round_dir / "aerial-cactus-identification__summary_1.json").write_text(json.dumps(summary))
    (dest / RUN / "timing.jsonl").write_bytes((sample_root / RUN / "timing.jsonl").read_bytes())
    return records, summary


def _records_db(tmp_path, records, summary, timing):
    url = make_db(tmp_path, "records.duckdb")
    con = duckdb.connect(url[len("duckdb:///"):])
    con.execute("BEGIN TRANSACTION")
    upsert_run(con, {"run_id": RUN, "arm": "hr_b", "kind": "training"})
    landed = load_task_round(con, run_id=RUN, round=1, task="aerial-cactus-identification",
                             records=records, summary=summary,
                             source_path=f"train://{RUN}/round_1/aerial-cactus-identification")
    steps = load_steps(con, RUN, timing, source_path=f"train://{RUN}/timing")
    con.execute("COMMIT")
    con.close()
    return url, landed, steps


def test_records_equal_the_same_records_from_a_file(sample_root, tmp_path):
    records, summary = _copy_round(sample_root, tmp_path / "root")
    timing = [json.loads(l) for l in (tmp_path / "root" / RUN / "timing.jsonl").read_text()
              .splitlines()]
    file_url = make_db(tmp_path, "file.duckdb")
    report = ingest_roots(file_url, [tmp_path / "root"])
    assert report.exit_code == 0
    rec_url, landed, steps = _records_db(tmp_path, records, summary, timing)
    assert landed == len(records) == 16 and steps == len(timing) == 2
    no_ids = ("source_id",)
    for table in ("nodes", "node_payloads", "steps"):
        assert table_dump(rec_url, table, no_ids) == table_dump(file_url, table, no_ids), table
    sg = ("source_id",)
    assert table_dump(rec_url, "sibling_groups", sg) == table_dump(file_url, "sibling_groups", sg)
    tr = ("node_source_id", "summary_source_id")
    assert table_dump(rec_url, "task_rounds", tr) == table_dump(file_url, "task_rounds", tr)


def test_reloading_a_source_path_replaces_it(sample_root, tmp_path):
    _, records, summary = _task_files(sample_root)
    url, _, _ = _records_db(tmp_path, records, summary, [])
    con = duckdb.connect(url[len("duckdb:///"):])
    load_task_round(con, run_id=RUN, round=1, task="aerial-cactus-identification",
                    records=records[:5] + [{"step": 0}], summary=None,
                    source_path=f"train://{RUN}/round_1/aerial-cactus-identification")
    con.close()
    assert rows(url, "SELECT count(*) FROM nodes") == [(5,)]
    assert rows(url, "SELECT count(*) FROM node_payloads") == [(5,)]
    assert rows(url, "SELECT sum(size) FROM sibling_groups") == [(5,)]
    assert rows(url, "SELECT line_no, reason FROM ingest_errors") == [(6, "missing id")]
    # the summary was written by the first load under its own source and stays
    assert rows(url, "SELECT nodes, summary_present FROM task_rounds") == [(16, True)]


def test_records_join_the_callers_transaction(sample_root, tmp_path):
    _, records, _ = _task_files(sample_root)
    url = make_db(tmp_path)
    con = duckdb.connect(url[len("duckdb:///"):])
    con.execute("BEGIN TRANSACTION")
    load_task_round(con, run_id=RUN, round=1, task="t", records=records, summary=None,
                    source_path="train://x")
    con.execute("ROLLBACK")
    con.close()
    for table in ("nodes", "sources", "task_rounds", "sibling_groups", "rounds"):
        assert rows(url, f"SELECT count(*) FROM {table}") == [(0,)], table
