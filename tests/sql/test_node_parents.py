"""node_parents picks the parent its header states: the id's one record in the child's own run;
else, among the records of the run lineage with that id, the nearest run, then the latest round
not after the child's, then the nearest later round, then the smallest (task, source line); a
parent_id that no record of the lineage carries gives parent_found FALSE."""
from __future__ import annotations

import pytest


@pytest.fixture
def family(rows):
    rows.run("root", arm="hr_b")
    rows.run("mid", arm="hr_b", resumed_from="root", resumed_step=3)
    rows.run("other", arm="hr_b")
    # root: p0 once; d0 three times (rounds 1 and 3 in task a, round 1 again in task b); e0 in
    # rounds 0 and 3
    rows.node("root", 1, "a", "p0", mode="draft", status="ok", reward=0.5)
    rows.node("root", 1, "a", "d0", mode="draft", status="crashed", reward=-0.5)
    rows.node("root", 3, "a", "d0", mode="draft", status="ok", reward=0.4)
    rows.node("root", 1, "b", "d0", mode="draft", status="timeout", reward=-1.0)
    rows.node("root", 0, "a", "e0", mode="draft", status="timeout", reward=-1.0)
    rows.node("root", 3, "a", "e0", mode="draft", status="ok", reward=0.4)
    rows.node("root", 2, "a", "c_unique", mode="improve", status="ok", reward=0.6, parent_id="p0")
    rows.node("root", 2, "a", "c_before", mode="debug", status="ok", reward=0.6, parent_id="d0")
    rows.node("root", 4, "a", "c_after", mode="improve", status="ok", reward=0.6, parent_id="d0")
    rows.node("root", 0, "a", "c_early", mode="debug", status="ok", reward=0.6, parent_id="d0")
    rows.node("root", 2, "a", "c_mid", mode="debug", status="ok", reward=0.6, parent_id="e0")
    rows.node("root", 2, "a", "c_lost", mode="improve", status="ok", reward=0.6, parent_id="x9")
    # mid resumed from root: p0 here shadows root's; d1 only in root's other run
    rows.node("mid", 4, "a", "p0", mode="draft", status="crashed", reward=-0.5)
    rows.node("mid", 5, "a", "m_own", mode="debug", status="ok", reward=0.7, parent_id="p0")
    rows.node("mid", 5, "a", "m_back", mode="improve", status="ok", reward=0.7, parent_id="d0")
    rows.node("mid", 5, "a", "m_lost", mode="improve", status="ok", reward=0.7, parent_id="o1")
    rows.node("other", 1, "a", "o1", mode="draft", status="ok", reward=0.5)
    return rows


EXPECTED = {  # child: (parent_found, parent_run_id, parent_round, parent_status)
    "c_unique": (True, "root", 1, "ok"),
    "c_before": (True, "root", 1, "crashed"),   # round 1 (not after 2) beats round 3; task a < b
    "c_after": (True, "root", 3, "ok"),         # round 3 is the latest not after 4
    "c_early": (True, "root", 1, "crashed"),    # none before round 0: the nearest later, task a
    "c_mid": (True, "root", 0, "timeout"),      # round 0, two before, beats round 3, one after
    "c_lost": (False, None, None, None),
    "m_own": (True, "mid", 4, "crashed"),       # its own run's p0, not root's
    "m_back": (True, "root", 3, "ok"),          # d0 lives in root: the latest round not after 5
    "m_lost": (False, None, None, None),        # o1 lives in a run outside the lineage
}


def test_each_child_gets_the_parent_the_rules_name(family):
    got = {r["node_id"]: (r["parent_found"], r["parent_run_id"], r["parent_round"], r["parent_status"])
           for r in family.query('SELECT * FROM "node_parents"')}
    assert got == EXPECTED


@pytest.mark.parametrize("run_id", ["root", "mid"])
def test_a_filter_on_the_run_gives_the_same_rows(family, run_id):
    every = family.query('SELECT * FROM "node_parents" WHERE "run_id" = ? ORDER BY ALL', run_id)
    alone = family.query('SELECT * FROM (SELECT * FROM "node_parents") WHERE "run_id" = ? ORDER BY ALL',
                         run_id)
    assert every == alone and {r["run_id"] for r in every} == {run_id}


def test_check_8_flags_exactly_the_children_without_a_parent(family):
    flagged = family.query('SELECT "node_id", "detail" FROM "invariant_violations" WHERE "check_no" = 8 '
                           'ORDER BY "node_id"')
    assert [r["node_id"] for r in flagged] == ["c_lost", "m_lost"]
    assert flagged[1]["detail"].startswith("parent_id o1 names no node of run mid or its ancestors at ")
