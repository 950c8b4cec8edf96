"""Planted violations: each is caught, with the right rows, by the view and by the gate."""
from __future__ import annotations

import shutil

import pytest

from tests.warehouse.quality.conftest import case_files, parse_case, plant
from warehouse.quality.runner import load_frames, run_checks, validate_frames
from warehouse.quality.suites import get_suites


def view_rows(url: str) -> list[tuple]:
    from warehouse.db import connect

    with connect(url, read_only=True) as con:
        rows = con.execute(
            'SELECT "check_no", "run_id", "round", "task", "node_id" FROM "invariant_violations"'
        ).fetchall()
    return sorted(rows, key=repr)


def gate_rows(outcomes) -> set[tuple]:
    """(check, run, round, task, node) of every offending row the failed expectations name."""
    return {(o.check_no, e["run_id"], e["round"], e["task"], e["node_id"])
            for o in outcomes if not o.success for e in o.examples}


def test_clean_warehouse_has_no_violations(clean_url):
    assert view_rows(clean_url) == []
    report = run_checks(clean_url, examples=None)
    assert report.success, report.failed
    assert {o.check_no for o in report.outcomes} == set(range(1, 17))  # 10-15: reward-model runs; 16: trained rounds


@pytest.mark.parametrize("case", case_files(), ids=lambda p: p.stem)
def test_view_reports_exactly_the_planted_rows(clean_url, case):
    sql, expected = parse_case(case)
    plant(clean_url, sql)
    assert view_rows(clean_url) == expected


def test_gate_reports_exactly_the_planted_rows_of_every_case(clean_template, tmp_path):
    """Every case through the expectations, in one GE run: each case's frames are stacked
    with its name prefixed to run_id (ids stay unique per run, so nothing leaks between
    cases), then the offending rows are compared case by case."""
    import pandas as pd

    stacked, expected = {s.frame: [] for s in get_suites()}, set()
    for case in case_files():
        path = tmp_path / f"{case.stem}.duckdb"
        shutil.copyfile(clean_template, path)
        sql, rows = parse_case(case)
        plant(f"duckdb:///{path}", sql)
        for name, frame in load_frames(f"duckdb:///{path}", None, stacked).items():
            frame["run_id"] = case.stem + "/" + frame["run_id"]
            stacked[name].append(frame)
        expected |= {(c, f"{case.stem}/{run}", rnd, task, node) for c, run, rnd, task, node in rows}

    frames = {name: pd.concat(parts, ignore_index=True) for name, parts in stacked.items()}
    outcomes = validate_frames(frames, get_suites(), examples=None)
    assert gate_rows(outcomes) == expected
    for outcome in outcomes:  # the count GE reports is the rows it names
        assert outcome.unexpected_count == len(outcome.examples)


def test_one_violation_of_each_invariant_at_once(clean_url):
    chosen = {}
    for case in case_files():
        chosen.setdefault(int(case.name.split("_", 1)[0]), case)  # first case of each check
    expected = []
    for case in chosen.values():
        sql, rows = parse_case(case)
        plant(clean_url, sql)
        expected += rows
    assert sorted({r[0] for r in expected}) == list(range(1, 10))

    assert view_rows(clean_url) == sorted(expected, key=repr)
    report = run_checks(clean_url, examples=None)
    assert not report.success
    assert gate_rows(report.outcomes) == set(expected)


def test_detail_names_the_reason_and_the_file_line(clean_url):
    from warehouse.db import connect

    plant(clean_url, "UPDATE nodes SET reward = 1.2 WHERE node_id = 'a1'")
    with connect(clean_url, read_only=True) as con:
        ((detail,),) = con.execute('SELECT "detail" FROM "invariant_violations"').fetchall()
    assert detail == ("status ok but reward 1.2 is outside [0, 1] "
                      "at /root/r1/round_1/cactus__1784437355.jsonl:1")


def test_run_filter_keeps_only_that_runs_rows(clean_url):
    plant(clean_url, "UPDATE nodes SET reward = 1.2 WHERE node_id IN ('a1', 'd2')")
    only_p0 = run_checks(clean_url, run="p0", examples=None)
    assert gate_rows(only_p0.outcomes) == {(1, "p0", 0, "denoise", "d2")}


def test_examples_are_capped_but_the_count_is_not(clean_url):
    plant(clean_url, "UPDATE nodes SET status = 'weird' WHERE run_id = 'r1'")
    (outcome,) = [o for o in run_checks(clean_url, suite="nodes", examples=5).failed
                  if o.description == "(2) status is a known status"]
    assert outcome.unexpected_count == 9  # r1 holds 9 node records
    assert len(outcome.examples) == 5
