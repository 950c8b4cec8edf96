"""The reward-model checks 10-15: the clean sample passes, every planted bad input fails the
gate with its offending rows, and the `rm_violations` view and the expectations agree."""
from __future__ import annotations

import duckdb
import pytest

from tests.rm_fixtures import *  # noqa: F403 - fixtures
from tests.rm_fixtures import RM_RUN, ingest
from warehouse.quality.runner import load_frames, run_checks, validate_frames
from warehouse.quality.suites import get_suites

RM_SUITES = ("rm_evaluations", "rm_sections", "rm_artifacts", "rm_splits")


def rm_outcomes(url: str):
    suites = [s for name in RM_SUITES for s in get_suites(name)]
    frames = load_frames(url, None, {s.frame for s in suites})
    return validate_frames(frames, suites, examples=None)


def gate_rows(outcomes) -> set[tuple]:
    return {(o.check_no, e["run_id"], e["task"], e["node_id"])
            for o in outcomes if not o.success for e in o.examples}


def view_rows(url: str, checks=None) -> set[tuple]:
    from warehouse.config import db_path_from_url

    con = duckdb.connect(db_path_from_url(url), read_only=True)
    try:
        rows = con.execute('SELECT "check_no", "run_id", "job", "item" FROM "rm_violations"'
                           ).fetchall()
    finally:
        con.close()
    return {r for r in rows if checks is None or r[0] in checks}


def plant_sql(url: str, sql: str) -> None:
    from warehouse.config import db_path_from_url

    con = duckdb.connect(db_path_from_url(url))
    try:
        con.execute(sql)
    finally:
        con.close()


def test_the_clean_sample_passes_every_reward_model_check(rm_url):
    assert view_rows(rm_url) == set()
    outcomes = rm_outcomes(rm_url)
    assert {o.check_no for o in outcomes} == set(range(10, 16))
    assert all(o.success for o in outcomes), [o for o in outcomes if not o.success]


# the offending rows each planted bad input must produce: (check, job, item)
FAULT_ROWS = {
    "missing_receipt": {(12, "formal", "formal_p2976_full")},
    "mismatched_receipt": {(12, "formal", "formal_p2880_full")},
    "score_120": {(10, "U-02/lr3e-5", "U-02_lr3e-5_p64_proxy")},
    "fourth_retained": {(13, "formal", f"progress {p}") for p in (2784, 2880, 2976, 3072)},
}


@pytest.mark.parametrize("fault", list(FAULT_ROWS))
def test_each_planted_bad_input_fails_the_gate(rm_root, db_url, fault):
    from ingest.rm_sample import plant_rm_faults

    plant_rm_faults(rm_root / RM_RUN, faults=(fault,))
    ingest(db_url, rm_root)
    expected = {(c, RM_RUN, job, item) for c, job, item in FAULT_ROWS[fault]}
    assert view_rows(db_url) == expected
    report = run_checks(db_url, suite=("rm_artifacts" if fault == "fourth_retained"
                                       else "rm_evaluations"), examples=None)
    assert not report.success
    assert gate_rows(report.outcomes) == expected


def test_all_planted_bad_inputs_at_once_fail_the_whole_gate(rm_root, db_url):
    from ingest.rm_sample import plant_rm_faults

    plant_rm_faults(rm_root / RM_RUN)
    ingest(db_url, rm_root)
    report = run_checks(db_url, examples=None)
    assert not report.success
    expected = {(c, RM_RUN, job, item) for rows in FAULT_ROWS.values() for c, job, item in rows}
    assert gate_rows(report.outcomes) == expected == view_rows(db_url)
    assert {o.check_no for o in report.failed} == {10, 12, 13}
    for outcome in report.outcomes:  # the count GE reports is the rows it names
        assert outcome.unexpected_count == len(outcome.examples)


# Violations that no file of the sample plants, written straight into the tables.
PLANTED_SQL = {
    "section score": (
        "UPDATE rm_eval_sections SET score = -3 WHERE evaluation_id = 'formal_p3072_full' "
        "AND section = 'Safety'",
        {(10, "formal_p3072_full", "Safety")}, {(10, "formal", "section Safety of formal_p3072_full")}),
    "n zero": ("UPDATE rm_evaluations SET n = 0 WHERE evaluation_id = 'U-01_smoke_p4_proxy'",
               {(11, "U-01/smoke", "U-01_smoke_p4_proxy")}, None),
    "se of the other split's n": (
        "UPDATE rm_evaluations SET se = 2.2306 WHERE evaluation_id = 'formal_p3072_full'",
        {(11, "formal", "formal_p3072_full")}, None),
    "a perfect score with an SE": (
        "UPDATE rm_evaluations SET score = 100 WHERE evaluation_id = 'U-01_smoke_p4_proxy'",
        {(11, "U-01/smoke", "U-01_smoke_p4_proxy")}, None),
    "official without a receipt": (
        "UPDATE rm_evaluations SET receipt_sha256 = NULL WHERE evaluation_id = "
        "'U-05_soup2_p128_proxy'", {(12, "U-05/soup2", "U-05_soup2_p128_proxy")}, None),
    "progress going back": (
        "UPDATE rm_artifacts SET progress = 100 WHERE job = 'U-03/len256' AND progress = 192",
        {(14, "U-03/len256", "progress 100")}, None),
    "step going back": (
        "UPDATE rm_steps SET step = 1 WHERE step = 3",
        {(14, "U-01/smoke", "step 1")}, None),
    "proxy larger than full": (
        "UPDATE rm_evaluations SET n = 4000, se = 0.75 WHERE evaluation_id = 'U-03_len256_p64_proxy'",
        {(15, "U-03/len256", "U-03_len256_p64_proxy")}, None),
}


@pytest.mark.parametrize("case", list(PLANTED_SQL))
def test_view_and_gate_agree_on_each_planted_row(rm_url, case):
    sql, gate, view = PLANTED_SQL[case]
    plant_sql(rm_url, sql)
    view = view if view is not None else gate
    assert view_rows(rm_url) == {(c, RM_RUN, job, item) for c, job, item in view}
    assert gate_rows(rm_outcomes(rm_url)) == {(c, RM_RUN, task, node) for c, task, node in gate}


def test_check_runs_the_reward_model_suites_for_one_run(rm_root, db_url):
    from ingest.rm_sample import plant_rm_faults

    plant_rm_faults(rm_root / RM_RUN, faults=("score_120",))
    ingest(db_url, rm_root)
    assert not run_checks(db_url, run=RM_RUN, suite="rm_evaluations").success
