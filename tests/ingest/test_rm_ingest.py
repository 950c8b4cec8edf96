"""Ingest of reward-model runs (docs/reward_model.md): idempotent, file by file, bad lines as
ingest_errors rows, receipts checked; the sample's planted bad inputs are each reported."""
from __future__ import annotations

import json

import duckdb
import pytest

from tests.rm_fixtures import *  # noqa: F403 - fixtures
from tests.rm_fixtures import RM_RUN, ingest

TABLES = ("rm_runs", "rm_references", "rm_budgets", "rm_jobs", "rm_steps", "rm_artifacts",
          "rm_evaluations", "rm_eval_sections")


def snapshot(url: str, exclude=()) -> dict:
    from warehouse.config import db_path_from_url

    con = duckdb.connect(db_path_from_url(url), read_only=True)
    try:
        out = {}
        for table in TABLES:
            cols = [c for (c,) in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = ?", [table]).fetchall()
                if c not in exclude]
            quoted = ", ".join(f'"{c}"' for c in cols)
            out[table] = sorted(map(repr, con.execute(f'SELECT {quoted} FROM "{table}"').fetchall()))
        out["runs"] = con.execute("SELECT run_id, kind, question_id, model FROM runs").fetchall()
        out["errors"] = sorted(con.execute("SELECT path, line_no, reason FROM ingest_errors").fetchall())
        return out
    finally:
        con.close()


def sql(url: str, query: str, *params):
    from warehouse.config import db_path_from_url

    con = duckdb.connect(db_path_from_url(url), read_only=True)
    try:
        return con.execute(query, list(params)).fetchall()
    finally:
        con.close()


def test_the_sample_root_holds_the_reward_model_run(tmp_path):
    from ingest.sample import write_sample_root

    root = write_sample_root(tmp_path / "sample")
    run = root / RM_RUN
    assert (run / "manifest.json").is_file() and (run / "outcome.json").is_file()
    assert len(list((run / "evaluations").glob("*.json"))) == 14
    assert len(list((run / "evaluations").glob("*.complete"))) == 14


def test_clean_run_lands_whole_and_official(db_url, rm_root):
    report = ingest(db_url, rm_root)
    assert report.exit_code == 0 and report.errors == []
    assert not [w for w in report.warnings if RM_RUN in w or "receipt" in w]
    assert sql(db_url, "SELECT kind, question_id, model FROM runs WHERE run_id = ?", RM_RUN) == [
        ("reward_model", "04-reward-model-rewardbench", "Mistral-7B-Instruct-v0.2")]
    counts = {t: sql(db_url, f'SELECT count(*) FROM "{t}"')[0][0] for t in TABLES}
    assert counts == {"rm_runs": 1, "rm_references": 1, "rm_budgets": 2, "rm_jobs": 12,
                      "rm_steps": 4, "rm_artifacts": 42, "rm_evaluations": 14,
                      "rm_eval_sections": 56}
    assert sql(db_url, "SELECT count(*) FROM rm_evaluations WHERE official AND "
                       "receipt_status = 'match'")[0][0] == 14


def test_reingest_is_idempotent_and_skips_every_file(db_url, rm_root):
    ingest(db_url, rm_root)
    before = snapshot(db_url)
    again = ingest(db_url, rm_root)
    assert again.files_loaded == 0 and again.files_skipped == again.files_total > 0
    assert snapshot(db_url) == before


def test_changed_file_replaces_its_rows(db_url, rm_root):
    ingest(db_url, rm_root)
    jobs = rm_root / RM_RUN / "jobs.jsonl"
    lines = jobs.read_text().splitlines()
    jobs.write_text("\n".join(lines[:3]) + "\n")
    report = ingest(db_url, rm_root)
    assert report.files_loaded == 1
    assert sql(db_url, "SELECT count(*) FROM rm_jobs")[0][0] == 3


def test_bad_lines_become_ingest_errors_and_the_rest_lands(db_url, rm_root):
    artifacts = rm_root / RM_RUN / "artifacts.jsonl"
    lines = artifacts.read_text().splitlines()
    lines[1] = '{"job": "U-02/lr5e-6", "progress": "sixty-four"}'
    lines[2] = "{not json"
    lines[3] = '{"job": "U-03/len256", "progress": 64, "parameters": NaN}'
    lines.insert(4, '{"progress": 65}')
    artifacts.write_text("\n".join(lines) + "\n")
    report = ingest(db_url, rm_root)
    assert report.exit_code == 3
    errors = sql(db_url, "SELECT line_no, reason FROM ingest_errors WHERE path = ? ORDER BY 1",
                 str(artifacts))
    assert [e[0] for e in errors] == [2, 3, 4, 5]
    assert "progress is varchar, expected an integer" == errors[0][1]
    assert "not valid JSON" in errors[1][1]
    assert "NaN is not a JSON number" in errors[2][1]
    assert "missing job" == errors[3][1]
    assert sql(db_url, "SELECT count(*) FROM rm_artifacts")[0][0] == 42 - 3
    assert any(f"{artifacts}:3: not valid JSON" in e for e in report.errors)


def test_a_summary_that_is_not_json_fails_whole(db_url, rm_root):
    bad = rm_root / RM_RUN / "evaluations" / "formal_p2880_full.json"
    bad.write_text('{"score": 37.36')
    report = ingest(db_url, rm_root)
    assert report.exit_code == 3 and report.files_failed == 1
    assert sql(db_url, "SELECT count(*) FROM rm_evaluations WHERE evaluation_id = "
                       "'formal_p2880_full'")[0][0] == 0
    assert sql(db_url, "SELECT line_no FROM ingest_errors WHERE path = ?", str(bad)) == [(0,)]
    assert sql(db_url, "SELECT count(*) FROM rm_evaluations")[0][0] == 13


def test_receipt_written_later_makes_the_evaluation_official(db_url, rm_root):
    receipt = rm_root / RM_RUN / "evaluations" / "formal_p3072_full.complete"
    kept = receipt.read_bytes()
    receipt.unlink()
    report = ingest(db_url, rm_root)
    assert any("formal_p3072_full.json: no receipt" in w for w in report.warnings)
    assert sql(db_url, "SELECT official, receipt_status FROM rm_evaluations WHERE "
                       "evaluation_id = 'formal_p3072_full'") == [(False, "missing")]
    receipt.write_bytes(kept)
    report = ingest(db_url, rm_root)
    assert report.files_loaded == 1
    assert sql(db_url, "SELECT official, receipt_status FROM rm_evaluations WHERE "
                       "evaluation_id = 'formal_p3072_full'") == [(True, "match")]


@pytest.fixture
def faulty(db_url, rm_root):
    from ingest.rm_sample import plant_rm_faults

    planted = plant_rm_faults(rm_root / RM_RUN)
    return db_url, rm_root, planted


def test_every_planted_bad_input_is_reported(faulty):
    url, root, planted = faulty
    report = ingest(url, root)
    assert report.exit_code == 3  # the mismatched receipt is a rejection
    evaluations = root / RM_RUN / "evaluations"
    mismatched = evaluations / f"{planted['mismatched_receipt']}.json"
    missing = evaluations / f"{planted['missing_receipt']}.json"
    assert [e for e in report.errors if "receipt does not match its summary" in e] == [
        e for e in report.errors if e.startswith(f"{mismatched}: ")]
    assert len(report.errors) == 1 and "not trusted" in report.errors[0]
    warnings = "\n".join(report.warnings)
    assert f"{missing}: no receipt (formal_p2976_full.complete): landed as not official" in warnings
    assert "check 10" in warnings and "score 120.0 is not in [0, 100]" in warnings
    assert "check 13" in warnings and "retains 4 artifacts" in warnings
    assert sql(url, "SELECT evaluation_id, official, receipt_status FROM rm_evaluations WHERE "
                    "NOT official ORDER BY 1") == [
        ("formal_p2880_full", False, "mismatch"), ("formal_p2976_full", False, "missing")]
    assert sql(url, "SELECT score, official FROM rm_evaluations WHERE evaluation_id = ?",
               planted["score_120"]) == [(120.0, True)]
    assert sql(url, "SELECT count(*) FROM rm_artifacts WHERE retained")[0][0] == 4
    assert sql(url, "SELECT line_no, path FROM ingest_errors") == [
        (0, str(mismatched))]


def test_planted_bad_inputs_reingest_idempotently(faulty):
    url, root, _ = faulty
    first = ingest(url, root)
    before = snapshot(url)
    again = ingest(url, root)
    assert again.files_loaded == 0 and again.exit_code == first.exit_code == 3
    assert sorted(again.warnings) == sorted(first.warnings)
    assert snapshot(url) == before


def test_export_then_ingest_gives_the_same_rows(rm_url, tmp_path, db_url):
    from ingest.rm_layout import export_run
    from warehouse.config import db_path_from_url

    con = duckdb.connect(db_path_from_url(rm_url), read_only=True)
    try:
        run_dir = export_run(con, RM_RUN, tmp_path / "export")
    finally:
        con.close()
    assert run_dir == tmp_path / "export" / RM_RUN
    report = ingest(db_url, tmp_path / "export")
    assert report.exit_code == 0, report.errors
    # bytes (hence hashes, sizes and paths) differ: the export writes sorted keys afresh
    exclude = {"source_id", "summary_path", "summary_sha256", "summary_size", "receipt_path",
               "receipt_sha256", "receipt_size"}
    assert snapshot(db_url, exclude) == snapshot(rm_url, exclude)


def test_export_writes_no_receipt_for_an_unofficial_evaluation(db_url, rm_root, tmp_path):
    from ingest.rm_layout import export_run
    from warehouse.config import db_path_from_url

    (rm_root / RM_RUN / "evaluations" / "formal_p2976_full.complete").unlink()
    ingest(db_url, rm_root)
    con = duckdb.connect(db_path_from_url(db_url), read_only=True)
    try:
        run_dir = export_run(con, RM_RUN, tmp_path / "export")
    finally:
        con.close()
    folder = run_dir / "evaluations"
    assert (folder / "formal_p2976_full.json").is_file()
    assert not (folder / "formal_p2976_full.complete").exists()
    assert len(list(folder.glob("*.complete"))) == 13


def test_an_evaluation_id_that_is_not_the_file_name_fails_that_file(db_url, rm_root):
    path = rm_root / RM_RUN / "evaluations" / "formal_p2880_full.json"
    summary = json.loads(path.read_text())
    path.write_text(json.dumps({**summary, "evaluation_id": "formal_p3072_full"}))
    report = ingest(db_url, rm_root)
    assert report.files_failed == 1
    assert any("differs from the file name's 'formal_p2880_full'" in e for e in report.errors)
    assert sql(db_url, "SELECT score FROM rm_evaluations WHERE evaluation_id = "
                       "'formal_p3072_full'") == [(38.325,)]


def test_a_file_that_breaks_midway_lands_not_at_all_and_the_others_do(db_url, rm_root,
                                                                       monkeypatch):
    from ingest import rm_records

    real, calls = rm_records._insert, []

    def flaky(con, table, row, source_id, key=()):
        if table == "rm_artifacts":
            calls.append(row["line_no"])
            if len(calls) == 5:
                raise RuntimeError("disk full")
        return real(con, table, row, source_id, key)

    monkeypatch.setattr(rm_records, "_insert", flaky)
    report = ingest(db_url, rm_root)
    assert report.files_failed == 1 and report.files_loaded == report.files_total - 1
    assert any("artifacts.jsonl: could not load: disk full" in e for e in report.errors)
    assert sql(db_url, "SELECT count(*) FROM rm_artifacts")[0][0] == 0
    assert sql(db_url, "SELECT count(*) FROM rm_evaluations")[0][0] == 14
    monkeypatch.setattr(rm_records, "_insert", real)
    again = ingest(db_url, rm_root)  # the failed file is tried again, and lands
    assert again.files_loaded == 1 and again.exit_code == 0
    assert sql(db_url, "SELECT count(*) FROM rm_artifacts")[0][0] == 42
