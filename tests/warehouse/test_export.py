"""`warehouse export DIR`: Parquet partitioned by run, readable back with the same rows."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from tests.sql.conftest import small_warehouse
from warehouse.cli import main
from warehouse.config import db_path_from_url


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    from warehouse.migrate import init_db

    url = f"duckdb:///{tmp_path_factory.mktemp('export') / 'wh.duckdb'}"
    init_db(url)
    small_warehouse(url)
    return db_path_from_url(url)


def read(pattern: str, sql: str):
    import duckdb

    return duckdb.sql(sql.replace("SRC", f"read_parquet('{pattern}', hive_partitioning=true)")).fetchall()


def test_export_partitions_by_run_and_round_trips(db, tmp_path):
    out = tmp_path / "lake"
    result = CliRunner().invoke(main, ["--db", db, "export", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "nodes").iterdir()) == ["run_id=run_a", "run_id=run_b"]
    assert read(f"{out}/nodes/*/*.parquet", "SELECT run_id, count(*) FROM SRC GROUP BY 1 ORDER BY 1") \
        == [("run_a", 16), ("run_b", 8)]
    assert read(f"{out}/task_round_metrics/*/*.parquet",
                "SELECT run_id, round, task, valid_rate FROM SRC ORDER BY 1, 2, 3")[0] \
        == ("run_a", 1, "cactus", 0.5)
    assert (out / "arms.parquet").exists()  # no run_id column: one file
    assert not (out / "node_payloads").exists() and "alembic_version" not in result.output


def test_export_refuses_to_overwrite_without_the_flag(db, tmp_path):
    runner = CliRunner()
    assert runner.invoke(main, ["--db", db, "export", str(tmp_path)]).exit_code == 0
    again = runner.invoke(main, ["--db", db, "export", str(tmp_path)])
    assert again.exit_code == 1 and "Pass --overwrite" in again.output
    assert runner.invoke(main, ["--db", db, "export", str(tmp_path), "--overwrite"]).exit_code == 0
    assert read(f"{tmp_path}/steps/*/*.parquet", "SELECT count(*) FROM SRC") == [(3,)]


def test_payloads_only_on_request_and_partitioned_by_their_nodes_run(db, tmp_path):
    result = CliRunner().invoke(main, ["--db", db, "export", str(tmp_path), "--payloads"])
    assert result.exit_code == 0, result.output
    assert "node_payloads: 0 rows" in result.output  # the small warehouse has none
