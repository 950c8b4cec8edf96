"""The reward-model record API (ingest/rm_records.py) a trainer writes through."""
from __future__ import annotations

import json

import duckdb
import pytest

from ingest.rm_layout import write_evaluation_files
from ingest.rm_records import (check_receipt, make_receipt, summary_bytes, write_artifacts,
                               write_budget, write_evaluation, write_jobs, write_run,
                               write_steps)
from warehouse.config import db_path_from_url

RUN = "rm_20261201_0300_tiny"
SUMMARY = {"evaluation_id": "final_64", "job": "formal", "phase": "formal", "progress": 64,
           "evaluator": "rewardbench_v1_score", "split": "full", "n": 2985, "score": 61.2,
           "se": 0.95, "sections": {"Chat": 80.0, "Chat Hard": {"score": 40.0, "n": 456}}}


@pytest.fixture
def con(db_url):
    con = duckdb.connect(db_path_from_url(db_url))
    yield con
    con.close()


def rows(con, sql: str, *params):
    return con.execute(sql, list(params)).fetchall()


def test_write_run_makes_a_reward_model_run_with_its_reference(con):
    written = write_run(con, {"run_id": RUN, "task": "tiny_bt", "base_model": "tiny",
                              "train_pairs": 512, "lora_rank": 8,
                              "reference": {"evaluator": "rewardbench_v1_score", "score": 70.0}})
    assert written.rows == 1 and written.errors == {}
    assert rows(con, "SELECT kind, question_id, model FROM runs WHERE run_id = ?", RUN) == [
        ("reward_model", "04-reward-model-rewardbench", "tiny")]
    assert rows(con, "SELECT reference_id, extra FROM rm_runs") == [
        ("tiny_bt/rewardbench_v1_score", '{"lora_rank": 8}')]
    assert rows(con, "SELECT reference_id, score FROM rm_references") == [
        ("tiny_bt/rewardbench_v1_score", 70.0)]


def test_bad_records_become_errors_and_the_good_ones_land(con):
    written = write_steps(con, RUN, [
        {"job": "formal", "step": 1, "loss": 0.69, "accuracy": 0.5},
        {"job": "formal", "step": 2, "loss": float("nan")},
        {"job": "formal", "step": True},
        {"step": 3},
        ["not", "an", "object"],
        {"job": "formal", "step": 4, "lr": "5e-6"},
        {"job": "formal", "step": 5, "tokens": 4096},
    ])
    assert written.rows == 2
    assert sorted(written.errors) == [2, 3, 4, 5, 6]
    assert "not a finite number" in written.errors[2]
    assert "step is boolean, expected an integer" == written.errors[3]  # ingest.normalize's reasons
    assert "missing job" == written.errors[4]
    assert "not a JSON object" in written.errors[5]
    assert "lr is varchar, expected a finite number" == written.errors[6]
    assert rows(con, "SELECT line_no, path FROM ingest_errors ORDER BY 1")[0] == (
        2, f"train://{RUN}/steps.jsonl")
    assert rows(con, "SELECT step, extra FROM rm_steps ORDER BY step") == [
        (1, None), (5, '{"tokens": 4096}')]


def test_writing_the_same_source_again_replaces_its_rows(con):
    for n in (3, 5, 2):
        write_steps(con, RUN, [{"job": "formal", "step": s} for s in range(1, n + 1)])
    assert rows(con, "SELECT count(*) FROM rm_steps") == [(2,)]
    write_steps(con, RUN, [{"job": "member1", "step": 1}], source_path="train://other")
    assert rows(con, "SELECT count(*) FROM rm_steps") == [(3,)]


def test_jobs_are_unique_and_phases_known(con):
    written = write_jobs(con, RUN, [{"job": "formal", "phase": "formal"},
                                    {"job": "formal", "phase": "formal"},
                                    {"job": "U-01/x", "phase": "warmup"}])
    assert written.rows == 1
    assert "duplicate job 'formal' (first on line 1)" == written.errors[2]
    assert "phase 'warmup' is not one of exploration, formal" == written.errors[3]


def test_official_exactly_when_the_receipt_matches(con):
    def receipt_for(name: str, case: str):
        data = summary_bytes({**SUMMARY, "evaluation_id": name})
        return {"match": make_receipt(data), "missing": None,
                "size": {**make_receipt(data), "size": len(data) + 1},
                "sha": {**make_receipt(data), "sha256": "0" * 64},
                "other summary": make_receipt(summary_bytes(SUMMARY)),
                "not an object": "xyz"}[case]

    cases = ("match", "missing", "size", "sha", "other summary", "not an object")
    for case in cases:
        write_evaluation(con, RUN, {**SUMMARY, "evaluation_id": case},
                         receipt=receipt_for(case, case))
    got = dict((e, (o, s)) for e, o, s in rows(
        con, "SELECT evaluation_id, official, receipt_status FROM rm_evaluations"))
    assert got == {"match": (True, "match"), "missing": (False, "missing"),
                   **{c: (False, "mismatch") for c in cases[2:]}}
    assert rows(con, "SELECT count(*) FROM ingest_errors") == [(4,)]  # each mismatch reported


def test_official_when_the_receipt_is_of_these_bytes(con):
    written = write_evaluation(con, RUN, SUMMARY, receipt=make_receipt(summary_bytes(SUMMARY)))
    assert written.errors == {}
    assert rows(con, "SELECT official, receipt_status FROM rm_evaluations") == [(True, "match")]
    assert rows(con, "SELECT section, score, n FROM rm_eval_sections ORDER BY 1") == [
        ("Chat", 80.0, None), ("Chat Hard", 40.0, 456)]


def test_a_mismatched_receipt_is_an_ingest_error(con):
    written = write_evaluation(con, RUN, SUMMARY, receipt={"sha256": "0" * 64, "size": 3},
                               receipt_path="final_64.complete")
    assert list(written.errors) == [0]
    assert written.errors[0].startswith("final_64.complete: receipt does not match its summary")
    assert rows(con, "SELECT count(*) FROM ingest_errors") == [(1,)]


def test_budget_and_artifacts(con):
    write_budget(con, RUN, {"formal": {"wall_clock_s": 3600, "reserve_s": 600,
                                       "train_s": 2950.0, "stop_reason": "completed"}})
    assert rows(con, "SELECT phase, train_s FROM rm_budgets") == [("formal", 2950.0)]
    bad = write_budget(con, RUN, {"warmup": {}}, source_path="train://bad-outcome")
    assert bad.rows == 0 and "phase 'warmup'" in bad.errors[0]
    written = write_artifacts(con, RUN, [{"job": "formal", "progress": 64, "retained": True}])
    assert written.rows == 1


def test_callers_transaction_rolls_everything_back(con):
    con.execute("BEGIN TRANSACTION")
    write_run(con, {"run_id": RUN, "task": "t"})
    write_steps(con, RUN, [{"job": "formal", "step": 1}])
    con.execute("ROLLBACK")
    assert rows(con, "SELECT count(*) FROM rm_steps") == [(0,)]
    assert rows(con, "SELECT count(*) FROM sources") == [(0,)]


def test_evaluation_files_receipt_only_when_complete(tmp_path):
    summary, receipt = write_evaluation_files(tmp_path, SUMMARY)
    assert check_receipt(summary.read_bytes(), json.loads(receipt.read_text())) == "match"
    assert receipt.name == "final_64.complete"
    path, none = write_evaluation_files(tmp_path, {**SUMMARY, "evaluation_id": "unfinished"},
                                        complete=False)
    assert none is None and path.is_file()
    assert not (tmp_path / "evaluations" / "unfinished.complete").exists()


def test_the_same_evaluation_or_phase_under_another_source_replaces_it(con):
    write_evaluation(con, RUN, SUMMARY, source_path="train://a")
    write_evaluation(con, RUN, {**SUMMARY, "score": 62.0, "sections": {"Chat": 81.0}},
                     source_path="train://b")
    assert rows(con, "SELECT score FROM rm_evaluations") == [(62.0,)]
    assert rows(con, "SELECT section, score FROM rm_eval_sections") == [("Chat", 81.0)]
    write_budget(con, RUN, {"formal": {"train_s": 1.0}}, source_path="train://c")
    write_budget(con, RUN, {"formal": {"train_s": 2.0}}, source_path="train://d")
    assert rows(con, "SELECT train_s FROM rm_budgets") == [(2.0,)]


def test_choices_are_the_vocabularys_and_refuse_other_values(con):
    written = write_evaluation(con, RUN, {**SUMMARY, "split": "half"})
    assert written.errors == {0: "split 'half' is not one of proxy, full, proxy_rows"}
    written = write_run(con, {"run_id": RUN, "task": "t", "reference": {"evaluator": "e", "score": 1.0,
                                                                          "direction": "up"}})
    assert written.errors == {0: "direction 'up' is not one of maximize, minimize"}
    assert rows(con, "SELECT count(*) FROM rm_evaluations") == [(0,)]
    assert rows(con, "SELECT count(*) FROM rm_runs") == [(0,)]


def test_an_integer_takes_a_whole_number_as_every_record_kind_does_and_refuses_a_fraction(con):
    written = write_artifacts(con, RUN, [{"job": "formal", "progress": 64.0, "parameters": 2 ** 40},
                                         {"job": "formal", "progress": 64.5}])
    assert written.errors == {2: "progress is a fraction, expected an integer"}
    assert rows(con, "SELECT progress, parameters FROM rm_artifacts") == [(64, 2 ** 40)]
