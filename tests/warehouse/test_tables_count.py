"""`warehouse tables` counts node_tokens from the nodes' stored lengths and node_parents from
the nodes with a parent: the same numbers as counting the views' rows, without unrolling
every token or looking every parent up; and logprob_mismatch without reading payloads while
nothing is trained."""
from __future__ import annotations

from tests.sql.conftest import small_warehouse
from warehouse.db import connect
from warehouse.migrate import init_db
from warehouse.query import COUNTED_FROM_TABLES, list_tables


def test_node_tokens_counted_from_lengths_equals_its_rows(tmp_path):
    url = f"duckdb:///{tmp_path / 'wh.duckdb'}"
    init_db(url)
    small_warehouse(url)
    with connect(url) as con:
        # more logprobs than ids, fewer, none at all, no ids, and a payload of no node
        con.execute("INSERT INTO node_payloads (source_id, line_no, response_token_ids, response_logprobs) "
                    "SELECT source_id, line_no, CASE WHEN line_no % 4 = 3 THEN NULL ELSE range(line_no % 5) END, "
                    "CASE WHEN line_no % 3 = 0 THEN NULL ELSE [-0.5 FOR _ IN range(line_no % 7)] END FROM nodes")
        con.execute("INSERT INTO node_payloads (source_id, line_no, response_token_ids) VALUES (999, 1, [1, 2, 3])")
        # as the loader keeps it: len(response_token_ids)
        con.execute('UPDATE nodes SET n_response_tokens = len(p.response_token_ids) FROM node_payloads AS p '
                    'WHERE p.source_id = nodes.source_id AND p.line_no = nodes.line_no')
        con.execute('UPDATE nodes SET n_response_tokens = 7 WHERE line_no = 1 AND NOT EXISTS '  # no payload row
                    '(SELECT 1 FROM node_payloads AS p WHERE p.source_id = nodes.source_id AND p.line_no = 1)')
        # parents: missing ones, and ids that several nodes of the run hold (one row a child still)
        con.execute("UPDATE nodes SET parent_id = CASE WHEN line_no % 3 = 0 THEN 'no-such-node' ELSE "
                    "(SELECT min(p.node_id) FROM nodes AS p WHERE p.run_id = nodes.run_id) END WHERE line_no % 2 = 0")
        con.execute("UPDATE nodes SET node_id = (SELECT min(p.node_id) FROM nodes AS p WHERE p.run_id = nodes.run_id) "
                    "WHERE line_no = 3")
        rows = con.execute('SELECT count(*) FROM "node_tokens"').fetchone()[0]
        children = con.execute('SELECT count(*) FROM "node_parents"').fetchone()[0]
        assert con.execute('SELECT count(*) FROM "logprob_mismatch"').fetchone()[0] == 0
    listed = {name: n for name, _, n in list_tables(url).rows}
    assert {"node_tokens", "node_parents"} <= set(COUNTED_FROM_TABLES)
    assert rows > 10 and listed["node_tokens"] == rows
    assert children > 3 and listed["node_parents"] == children
    assert listed["logprob_mismatch"] == 0
    with connect(url) as con:  # trained nodes: the view is counted
        con.execute("INSERT INTO node_train_tokens (source_id, line_no, run_id, trainer_logprobs) "
                    "SELECT n.source_id, n.line_no, n.run_id, [-0.5, -0.25] FROM nodes AS n "
                    "JOIN node_payloads AS p USING (source_id, line_no) WHERE len(p.response_token_ids) > 1")
        trained = con.execute('SELECT count(*) FROM "logprob_mismatch"').fetchone()[0]
    assert trained > 0 and {name: n for name, _, n in list_tables(url).rows}["logprob_mismatch"] == trained


def test_metric_views_counted_as_their_keys_equal_their_rows(tmp_path, small_sample_root):
    """run_metrics, round_metrics, task_round_metrics, decision_rule and round_task_means are
    counted from their sql/ files' `keys` CTEs, not computed: the same numbers as their rows
    where keys come from one table only (a run with only a manifest, a round with only its
    directory, a task-round with only a summary, nodes with no summary, a run with only timing
    rows), over resumed runs and their lineage, and on an ingested sample root."""
    from click.testing import CliRunner

    from tests.sql.conftest import Rows
    from warehouse.cli import main
    from warehouse.query import COUNTED_AS_KEYS

    url = f"duckdb:///{tmp_path / 'wh.duckdb'}"
    init_db(url)
    small_warehouse(url)
    r = Rows(url)
    r._next_source = iter(range(1000, 2000))  # past small_warehouse's sources
    r.run("run_manifest_only", arm="hr_b")
    r.run("run_resumed_twice", arm="hr_b", resumed_from="run_b", resumed_step=2)
    r.insert("rounds", run_id="run_a", round=3)
    r.insert("rounds", run_id="run_rounds_only", round=1)
    r.task_round("run_b", 3, "cactus", node_file=False)
    r.node("run_b", 4, "dogs", "no-summary-1", status="ok", reward=0.5)
    r.node("run_b", 4, "dogs", "no-summary-2", status="crashed", reward=-0.5)
    r.node("run_nodes_only", 1, "cactus", "orphan", status="ok", reward=0.2)
    r.node("run_resumed_twice", 3, "dogs", "late", status="ok", reward=0.9)
    r.step("run_timing_only", 1, 10.0, line_no=1)
    r.con.close()

    def assert_counts_equal_rows(db_url: str) -> dict:
        listed = {name: n for name, _, n in list_tables(db_url).rows}
        with connect(db_url, read_only=True) as con:
            for view in COUNTED_AS_KEYS:
                assert listed[view] == con.execute(f'SELECT count(*) FROM "{view}"').fetchone()[0], view
                assert view in COUNTED_FROM_TABLES
        return listed

    listed = assert_counts_equal_rows(url)
    assert listed["run_metrics"] == 6 and listed["round_metrics"] > 6 and listed["round_task_means"] > 3

    sample = f"duckdb:///{tmp_path / 'sample.duckdb'}"
    runner = CliRunner()
    assert runner.invoke(main, ["--db", sample, "init"]).exit_code == 0
    assert runner.invoke(main, ["--db", sample, "ingest", str(small_sample_root)]).exit_code in (0, 2)
    assert assert_counts_equal_rows(sample)["task_round_metrics"] > 0


def test_keys_cte_is_the_views_own_union():
    """keys_cte reads the `keys` CTE out of the view's file (the grain said once, in sql/), its
    parentheses matched, with the CTEs before it that it reads, and names the file when the
    view has none."""
    import pytest

    from warehouse.query import keys_cte

    clause = keys_cte("task_round_metrics")
    assert clause.startswith("WITH\nnode_rows AS (") and clause.endswith("FROM node_rows\n)")
    assert '\nkeys AS (\n    SELECT "run_id", "round", "task" FROM "task_rounds"\n' in clause
    with pytest.raises(ValueError, match=r"sql/node_tokens\.sql has no `keys AS \(`"):
        keys_cte("node_tokens")
