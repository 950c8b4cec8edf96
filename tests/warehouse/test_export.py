"""`warehouse export DIR`: Parquet partitioned by run, readable back with the same rows."""
from __future__ import annotations

import json

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
    assert "alembic_version" not in result.output
    manifest = json.loads((out / "export_manifest.json").read_text())
    listed = {r["name"]: r for r in manifest["relations"]}
    assert listed["nodes"]["rows"] == 24 and listed["nodes"]["kind"] == "table" and listed["nodes"]["partitioned"]
    assert listed["task_round_metrics"]["kind"] == "view" and "node_payloads" in listed
    assert "node_tokens" not in listed and not (out / "node_tokens").exists()
    assert manifest["left_out"] == ["node_tokens", "node_token_index", "node_token_index_writes"]


def test_export_refuses_to_overwrite_without_the_flag(db, tmp_path):
    runner = CliRunner()
    assert runner.invoke(main, ["--db", db, "export", str(tmp_path)]).exit_code == 0
    again = runner.invoke(main, ["--db", db, "export", str(tmp_path)])
    assert again.exit_code == 1 and "Pass --overwrite" in again.output
    assert runner.invoke(main, ["--db", db, "export", str(tmp_path), "--overwrite"]).exit_code == 0
    assert read(f"{tmp_path}/steps/*/*.parquet", "SELECT count(*) FROM SRC") == [(3,)]


def test_payloads_are_left_out_only_on_request_and_the_manifest_says_so(db, tmp_path):
    result = CliRunner().invoke(main, ["--db", db, "export", str(tmp_path), "--no-payloads"])
    assert result.exit_code == 0, result.output
    assert "node_payloads" not in result.output
    manifest = json.loads((tmp_path / "export_manifest.json").read_text())
    assert manifest["left_out"] == ["node_payloads", "node_tokens", "node_token_index", "node_token_index_writes"]
    assert not (tmp_path / "node_payloads").exists() and not (tmp_path / "node_tokens").exists()
    assert {r["name"] for r in manifest["relations"]}.isdisjoint({"node_payloads", "node_tokens"})


def table_rows(url: str) -> dict:
    from warehouse.db import connect
    from warehouse.schema import TABLE_NAMES

    with connect(url, read_only=True) as con:
        return {t: con.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall() for t in TABLE_NAMES}


def test_ingesting_an_export_into_a_fresh_warehouse_restores_every_table(db, tmp_path):
    from warehouse.migrate import init_db

    runner = CliRunner()
    assert runner.invoke(main, ["--db", db, "export", str(tmp_path / "lake")]).exit_code == 0
    fresh = tmp_path / "fresh.duckdb"
    init_db(f"duckdb:///{fresh}")
    result = runner.invoke(main, ["--db", str(fresh), "ingest", str(tmp_path / "lake")])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Restored ")
    original, restored = table_rows(f"duckdb:///{db}"), table_rows(f"duckdb:///{fresh}")
    assert sum(map(len, original.values())) > 40 and original["nodes"] and original["steps"]
    for table in original:
        assert restored[table] == original[table], table
    again = runner.invoke(main, ["--db", str(fresh), "ingest", str(tmp_path / "lake")])  # refused, unchanged
    assert again.exit_code == 1 and "already holds data" in again.output and "Traceback" not in again.output
    assert table_rows(f"duckdb:///{fresh}") == original


def test_payloads_go_run_by_run_and_those_of_no_node_too(db, tmp_path):
    import shutil

    from warehouse.db import connect
    from warehouse.migrate import init_db
    from warehouse.tokens import rebuild_index

    own = tmp_path / "own.duckdb"
    shutil.copy(db, own)
    with connect(f"duckdb:///{own}") as con:
        con.execute("INSERT INTO node_payloads (source_id, line_no, response_token_ids) "
                    "SELECT source_id, line_no, [line_no, 7] FROM nodes")
        con.execute("INSERT INTO node_payloads (source_id, line_no, response_token_ids) VALUES (999, 1, [5, 6])")
        rebuild_index(con)  # as a writer of payloads writes their token index
    runner = CliRunner()
    assert runner.invoke(main, ["--db", str(own), "export", str(tmp_path / "lake")]).exit_code == 0
    assert sorted(p.name for p in (tmp_path / "lake" / "node_payloads").iterdir()) \
        == ["run_id=__HIVE_DEFAULT_PARTITION__", "run_id=run_a", "run_id=run_b"]
    assert read(f"{tmp_path}/lake/node_payloads/run_id=run_*/*.parquet",
                "SELECT run_id, count(*) FROM SRC GROUP BY 1 ORDER BY 1") == [("run_a", 16), ("run_b", 8)]
    assert read(f"{tmp_path}/lake/node_payloads/run_id=__HIVE_DEFAULT_PARTITION__/*.parquet",
                "SELECT run_id, source_id, response_token_ids FROM SRC") == [(None, 999, [5, 6])]
    fresh = tmp_path / "fresh.duckdb"
    init_db(f"duckdb:///{fresh}")
    assert runner.invoke(main, ["--db", str(fresh), "ingest", str(tmp_path / "lake")]).exit_code == 0
    assert table_rows(f"duckdb:///{fresh}") == table_rows(f"duckdb:///{own}")

def _export_claiming_one_step_too_many(db: str, lake):
    """An export of `db` whose manifest counts one `steps` row more than its files hold."""
    assert CliRunner().invoke(main, ["--db", db, "export", str(lake)]).exit_code == 0
    manifest = json.loads((lake / "export_manifest.json").read_text())
    for relation in manifest["relations"]:
        relation["rows"] += relation["name"] == "steps"
    (lake / "export_manifest.json").write_text(json.dumps(manifest))
    return lake


def test_an_export_whose_files_lost_rows_restores_nothing(db, tmp_path):
    from warehouse.migrate import init_db

    lake = _export_claiming_one_step_too_many(db, tmp_path / "lake")
    fresh = f"duckdb:///{tmp_path / 'fresh.duckdb'}"
    init_db(fresh)
    result = CliRunner().invoke(main, ["--db", fresh, "ingest", str(lake)])
    assert result.exit_code == 1 and "steps: the export's manifest lists 4 rows, its files hold 3" in result.output
    assert sum(map(len, table_rows(fresh).values())) == len(table_rows(fresh)["arms"]) + len(table_rows(fresh)["questions"])


def _tour_line(start: str) -> list[str]:
    """The README tour's line that starts with `start`, as its words (the comment dropped)."""
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    line = next(line for line in readme.splitlines() if line.startswith(start))
    return shlex.split(line, comments=True)


def test_the_readme_tour_exports_and_restores_into_a_new_file_as_written(db, tmp_path, monkeypatch):
    import shutil

    shutil.copyfile(db, tmp_path / "warehouse.duckdb")  # the tour's ./warehouse.duckdb
    monkeypatch.chdir(tmp_path)
    export, restore = _tour_line("warehouse export parquet/"), _tour_line("warehouse --db copy.duckdb ingest")
    assert restore == ["warehouse", "--db", "copy.duckdb", "ingest", "parquet/"]
    runner = CliRunner()
    assert runner.invoke(main, export[1:]).exit_code == 0
    result = runner.invoke(main, restore[1:])  # no `warehouse init` first
    assert result.exit_code == 0 and result.output.startswith("Restored "), result.output
    assert table_rows(f"duckdb:///{tmp_path / 'copy.duckdb'}") == table_rows(f"duckdb:///{db}")


def test_a_restore_into_a_new_file_that_fails_leaves_no_file(db, tmp_path):
    lake = _export_claiming_one_step_too_many(db, tmp_path / "lake")
    result = CliRunner().invoke(main, ["--db", str(tmp_path / "copy.duckdb"), "ingest", str(lake)])
    assert result.exit_code == 1 and result.output.startswith("Error: ") and "steps:" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lake"]  # no copy.duckdb, no .wal



def test_a_runs_payloads_go_in_files_of_a_bounded_number_and_restore_equal(db, tmp_path, monkeypatch):
    """Each COPY writes at most PAYLOADS_PER_FILE payloads (the Parquet writer holds a row group's
    rows in memory: one COPY of a whole run's payloads ran the memory budget out), a node file's
    payloads in one file; the restore reads every file back."""
    import shutil
    from collections import Counter

    from warehouse import export
    from warehouse.db import connect
    from warehouse.migrate import init_db

    own = tmp_path / "own.duckdb"
    shutil.copy(db, own)
    with connect(f"duckdb:///{own}") as con:
        con.execute("INSERT INTO node_payloads (source_id, line_no, response_token_ids) "
                    "SELECT source_id, line_no, [line_no, 7] FROM nodes")
        per_source = con.execute('SELECT "run_id", "source_id", count(*) FROM "nodes" GROUP BY 1, 2 ORDER BY 1, 2'
                                 ).fetchall()
    assert max(n for *_, n in per_source) >= 2 and len(per_source) > 2
    monkeypatch.setattr(export, "PAYLOADS_PER_FILE", 3)
    assert CliRunner().invoke(main, ["--db", str(own), "export", str(tmp_path / "lake")]).exit_code == 0
    files = sorted((tmp_path / "lake" / "node_payloads").glob("*/*.parquet"))
    counts = Counter(n for f in files for (n,) in read(str(f), "SELECT count(*) FROM SRC"))
    assert len(files) > len({r[0] for r in per_source}) and max(counts) <= max(3, max(n for *_, n in per_source))
    for f in files:  # a source's payloads in one file
        sources = read(str(f), "SELECT DISTINCT source_id FROM SRC")
        assert all(read(str(g), f"SELECT count(*) FROM SRC WHERE source_id = {s}") == [(0,)]
                   for g in files if g != f for (s,) in sources)
    assert list(export._chunks_by_run([("a", 1, 2), ("a", 2, 2), ("a", 5, 4), ("b", 6, 1), ("b", 7, 1),
                                       ("b", 8, 2)])) == [("a", [(1, 1), (2, 2), (5, 5)]), ("b", [(6, 7), (8, 8)])]
    fresh = tmp_path / "fresh.duckdb"
    init_db(f"duckdb:///{fresh}")
    assert CliRunner().invoke(main, ["--db", str(fresh), "ingest", str(tmp_path / "lake")]).exit_code == 0
    assert table_rows(f"duckdb:///{fresh}")["node_payloads"] == table_rows(f"duckdb:///{own}")["node_payloads"]
