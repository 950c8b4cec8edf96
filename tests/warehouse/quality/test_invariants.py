"""Planted violations: each is caught, with the right rows, by the view and by the gate."""
from __future__ import annotations

import pytest

from tests.warehouse.quality.conftest import case_files, parse_case, plant
from warehouse.quality.runner import run_checks


def view_rows(url: str) -> list[tuple]:
    from warehouse.db import connect

    with connect(url, read_only=True) as con:
        rows = con.execute(
            'SELECT "check_no", "run_id", "round", "task", "node_id" FROM "invariant_violations"'
        ).fetchall()
    return sorted(rows, key=repr)


def gate_rows(report) -> set[tuple]:
    """(check, run, round, task, node) of every offending row the expectations name."""
    return {(o.check_no, e["run_id"], e["round"], e["task"], e["node_id"])
            for o in report.failed for e in o.examples}


def test_clean_warehouse_has_no_violations(clean_url):
    assert view_rows(clean_url) == []
    report = run_checks(clean_url, examples=None)
    assert report.success, [o for o in report.failed]
    assert {o.check_no for o in report.outcomes} == set(range(1, 10))


@pytest.mark.parametrize("case", case_files(), ids=lambda p: p.stem)
def test_planted_violation_is_caught_with_its_rows(clean_url, case):
    sql, expected = parse_case(case)
    plant(clean_url, sql)

    assert view_rows(clean_url) == expected
    report = run_checks(clean_url, examples=None)
    assert gate_rows(report) == set(expected)
    assert {o.check_no for o in report.failed} == {row[0] for row in expected}
    for outcome in report.failed:  # the count GE reports is the rows it names
        assert outcome.unexpected_count == len(outcome.examples)


def test_one_violation_of_each_invariant_at_once(clean_url):
    chosen = {}
    for case in case_files():
        check_no = int(case.name.split("_", 1)[0])
        chosen.setdefault(check_no, case)  # the first case of each invariant
    expected = []
    for case in chosen.values():
        sql, rows = parse_case(case)
        plant(clean_url, sql)
        expected += rows
    assert sorted({r[0] for r in expected}) == list(range(1, 10))

    assert view_rows(clean_url) == sorted(expected, key=repr)
    report = run_checks(clean_url, examples=None)
    assert gate_rows(report) == set(expected)


def test_detail_names_the_reason_and_the_file_line(clean_url):
    from warehouse.db import connect

    plant(clean_url, "UPDATE nodes SET reward = 1.2 WHERE node_id = 'a1'")
    with connect(clean_url, read_only=True) as con:
        (detail,) = con.execute('SELECT "detail" FROM "invariant_violations"').fetchone()
    assert detail == ("status ok but reward 1.2 is outside [0, 1] "
                      "at /root/r1/round_1/cactus__1784437355.jsonl:1")


def test_run_filter_keeps_only_that_runs_rows(clean_url):
    plant(clean_url, "UPDATE nodes SET reward = 1.2 WHERE node_id IN ('a1', 'd2')")
    only_p0 = run_checks(clean_url, run="p0", examples=None)
    assert gate_rows(only_p0) == {(1, "p0", 0, "denoise", "d2")}
