"""The search trees of a resumed run: every node of its lineage, read back from the warehouse.

A run resumed from `RUN:STEP` continues RUN's trees as they stood after round STEP (step N is
the update after round N), and RUN's own resume point in turn, back to the lineage root
(`runs.resumed_from_run` / `resumed_from_step`, as data root 000's hr24k_u6b resumed hr24k_u6 at
step 10 and so did not inherit its rounds 11-14).
"""
from __future__ import annotations

from train.rollout.tree import TaskTree
from warehouse.errors import TerminalError

NODE_FIELDS = ("task", "id", "parent_id", "depth", "mode", "status", "reward", "test_metric", "oriented",
               "exc_type", "term_tail", "sibling_group", "code")
_NODES = """
SELECT n."task", n."node_id", n."parent_id", n."depth", n."mode", n."status", n."reward", n."test_metric",
       n."oriented", n."exc_type", n."term_tail", n."sibling_group", p."code"
FROM "nodes" AS n JOIN "node_payloads" AS p USING ("source_id", "line_no")
WHERE n."run_id" = ? AND n."round" <= ?
ORDER BY n."round", n."step", n."line_no"
"""


def lineage(con, run_id: str, last_round: int) -> list[tuple[str, int]]:
    """[(run, last round inherited)], the lineage root first."""
    chain, seen = [], set()
    while run_id is not None and run_id not in seen:
        seen.add(run_id)
        chain.append((run_id, last_round))
        row = con.execute('SELECT "resumed_from_run", "resumed_from_step" FROM "runs" WHERE "run_id" = ?',
                          [run_id]).fetchone()
        run_id, last_round = (row[0], row[1]) if row and row[0] is not None else (None, None)
    return chain[::-1]


def load_trees(db_url: str, run_id: str, step: int, tasks) -> dict[str, TaskTree]:
    """One TaskTree per task holding the lineage's nodes up to round `step` of `run_id`."""
    from warehouse.db import connect

    with connect(db_url, read_only=True) as con:
        if not con.execute('SELECT count(*) FROM "nodes" WHERE "run_id" = ?', [run_id]).fetchone()[0]:
            raise TerminalError(f"--resume-from: the warehouse holds no nodes of run {run_id!r}; "
                                "ingest it first (warehouse ingest ROOT).")
        rows = [row for run, last in lineage(con, run_id, step) for row in con.execute(_NODES, [run, last]).fetchall()]
    trees = {task: TaskTree(task) for task in tasks}
    for row in rows:
        node = dict(zip(NODE_FIELDS, row))
        if node["task"] in trees:
            trees[node["task"]].nodes.append(node)
    for tree in trees.values():
        tree.expansions = len({n["sibling_group"] for n in tree.nodes})
    return trees
