"""A metric view asked for one run reads nodes few times, and most reads filtered on the run.

Each read of a table is a scan, and on DuckLake every scan costs its catalog queries (a few
milliseconds each through SQLite, whatever the run's size): the dashboard's run and runs pages
read run_metrics, round_metrics and task_round_metrics, so the views read nodes once for their
counts and rates, and a filter on run_id reaches their reads of nodes (the page costs what the run
holds, not what the warehouse holds). The counts are the plans' own; a rewrite that adds a
read of nodes, or loses the filter on one, fails here.
"""
from __future__ import annotations

import json

import pytest

# (reads of nodes, of them filtered on run_id) in each view's plan for one run. run_metrics:
# its one grouped read; node_parents' children (filtered above the read, as a CTE read twice),
# the run's ids, and the parents in its lineage (not known before the read); run_lineage's
# records of runs without a runs row, twice (roots, node_parents).
# round_metrics: its one grouped read, and mismatch_sums' join of node_train_tokens to nodes.
NODE_READS = {"run_metrics": (6, 4), "task_round_metrics": (1, 1), "round_metrics": (2, 2)}


def node_reads(con, view: str, run_id: str) -> tuple[int, int]:
    """(reads of nodes, of them filtered on `run_id`) in the plan of `view` for that run."""
    scans = [s for s in _scans(con, f"SELECT * FROM \"{view}\" WHERE \"run_id\" = '{run_id}'")
             if s["Table"].split(".")[-1] == "nodes"]
    return len(scans), sum(f"run_id='{run_id}'" in str(s.get("Filters", "")) for s in scans)


def _scans(con, sql: str) -> list[dict]:
    plan = json.loads(con.execute("EXPLAIN (FORMAT json) " + sql).fetchall()[0][1])
    found: list[dict] = []

    def walk(node):
        info = node.get("extra_info") or {}
        if isinstance(info, dict) and "Table" in info:
            found.append(info)
        for child in node.get("children", []):
            walk(child)

    for top in plan:
        walk(top)
    return found


@pytest.fixture
def two_runs(rows):
    for run_id in ("r1", "r2"):
        rows.run(run_id, arm="hr_b")
        rows.task_round(run_id, 1, "a")
        rows.node(run_id, 1, "a", "n0", mode="draft", status="ok", reward=0.5)
        rows.node(run_id, 1, "a", "n1", mode="improve", status="ok", reward=0.7, parent_id="n0")
    return rows


@pytest.mark.parametrize("view", sorted(NODE_READS))
def test_a_view_for_one_run_reads_nodes_a_fixed_number_of_times_filtered(two_runs, view):
    assert node_reads(two_runs.con, view, "r1") == NODE_READS[view]
