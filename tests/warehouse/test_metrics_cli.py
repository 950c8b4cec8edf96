"""`warehouse metrics` through CliRunner: views by name, filters, formats, clear errors."""
from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from tests.sql.conftest import small_warehouse
from warehouse.cli import main
from warehouse.config import db_path_from_url


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """One small warehouse for the module: every command here only reads."""
    from warehouse.migrate import init_db

    url = f"duckdb:///{tmp_path_factory.mktemp('metrics') / 'wh.duckdb'}"
    init_db(url)
    small_warehouse(url)
    return db_path_from_url(url)


def invoke(db, *args):
    return CliRunner().invoke(main, ["--db", db, "metrics", *args])


def test_default_view_is_task_round_metrics_in_key_order(db):
    result = invoke(db, "--format", "json")
    assert result.exit_code == 0, result.output
    got = [(r["run_id"], r["round"], r["task"]) for r in json.loads(result.output)]
    assert got == [("run_a", 1, "cactus"), ("run_a", 1, "dogs"), ("run_a", 2, "cactus"),
                   ("run_a", 2, "dogs"), ("run_b", 2, "cactus"), ("run_b", 2, "dogs")]


def test_run_and_task_filters(db):
    result = invoke(db, "--run", "run_b", "--task", "dogs", "--format", "json")
    rows = json.loads(result.output)
    assert len(rows) == 1
    assert rows[0]["valid_rate"] == 0.5 and rows[0]["nodes"] == 4
    assert rows[0]["valid_reward_mean"] == pytest.approx((0.2 + 0.4) / 2)


def test_csv_of_round_metrics_matches_the_timing_rows(db):
    result = invoke(db, "--view", "round_metrics", "--run", "run_a", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.output)))
    assert [(r["round"], float(r["total_s"])) for r in rows] == [("1", 101.0), ("2", 102.0)]
    assert float(rows[0]["per_node_step_s"]) == pytest.approx(101.0 / 8)


def test_table_format_prints_nulls_and_a_row_count(db):
    result = invoke(db, "--view", "decision_rule", "--run", "run_a", "--task", "cactus")
    assert result.exit_code == 0, result.output
    assert "(2 rows)" in result.output


def test_task_filter_on_a_view_without_task_is_one_clear_error(db):
    result = invoke(db, "--view", "run_metrics", "--task", "dogs")
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: view 'run_metrics' has no task column; use --view with one of: "
        "task_round_metrics, decision_rule, invariant_violations, logprob_mismatch"]


def test_unknown_view_is_refused_by_the_option(db):
    result = invoke(db, "--view", "nodes")
    assert result.exit_code == 2 and "Invalid value for '--view'" in result.output


def test_an_unknown_run_is_an_error_as_in_check_and_report(db):
    result = CliRunner().invoke(main, ["--db", db, "metrics", "--run", "no_such_run"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: no run 'no_such_run' in the warehouse.")
    known = CliRunner().invoke(main, ["--db", db, "metrics", "--run", "run_a", "--task", "no_such_task"])
    assert known.exit_code == 0 and "(0 rows)" in known.output  # a known run, nothing to show


def test_missing_warehouse_names_the_fix(tmp_path):
    result = invoke(str(tmp_path / "none.duckdb"))
    assert result.exit_code == 1
    assert "Run 'warehouse --db" in result.output and "init' first" in result.output


def test_library_function_returns_the_same_rows(db):
    from warehouse.config import resolve_db_url
    from warehouse.metrics import metrics

    result = metrics(resolve_db_url(db), view="run_metrics")
    by_run = {row[0]: dict(zip(result.columns, row)) for row in result.rows}
    assert by_run["run_b"]["root_run_id"] == "run_a"
    assert by_run["run_a"]["steps_logged"] == 2 and by_run["run_a"]["steps_missing"] == 0
