"""`warehouse sql` sees the warehouse and nothing else of the machine, on both engines.

Without --allow-files a query cannot read a host file (read_csv, glob, ATTACH), write one
(COPY ... TO, EXPORT DATABASE, also into a DuckLake's own data path) or turn file access back
on; each refusal is one `Error:` line naming --allow-files. With the flag the same query runs.
"""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from warehouse.cli import main
from warehouse.config import resolve_db_url


@pytest.fixture(params=["file", "ducklake"])
def url(request, tmp_path, db_url) -> str:
    if request.param == "file":
        return db_url
    from warehouse.migrate import init_db

    lake = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'cat.sqlite'}", tmp_path / "files")
    init_db(lake)
    from warehouse.db import connect

    with connect(lake) as con:  # the arms as Parquet under the data path, not inlined in the catalog
        con.execute("CALL ducklake_flush_inlined_data('wh')")
    assert list((tmp_path / "files").rglob("*.parquet"))
    return lake


def sql(url: str, *args: str):
    return CliRunner().invoke(main, ["--db", url, "sql", *args])


def one_error_line(result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert "--allow-files" in lines[0]
    return lines[0]


@pytest.mark.parametrize("query", [
    "SELECT * FROM read_csv('{secret}')",
    "SELECT * FROM read_text('{secret}')",
    "SELECT * FROM glob('{dir}/*')",
    "ATTACH '{dir}/other.duckdb' AS other",
])
def test_reading_a_host_file_is_refused(url, tmp_path, query):
    secret = tmp_path / "secret.csv"
    secret.write_text("token\nhunter2\n")
    result = sql(url, query.format(secret=secret, dir=tmp_path))
    assert "hunter2" not in result.output
    one_error_line(result)
    assert not (tmp_path / "other.duckdb").exists()


@pytest.mark.parametrize("target", ["host", "data_path"])
def test_writing_a_file_is_refused_even_into_the_lakes_own_files(url, tmp_path, target):
    out = (tmp_path / "out.csv") if target == "host" else (tmp_path / "files" / "planted.parquet")
    for query in (f"COPY (SELECT 1 AS x) TO '{out}'", f"EXPORT DATABASE '{tmp_path / 'dump'}'"):
        one_error_line(sql(url, query))
    assert not out.exists() and not (tmp_path / "dump").exists()


def test_file_access_cannot_be_turned_back_on(url):
    result = sql(url, "SET enable_external_access = true")
    assert result.exit_code == 1 and "locked" in result.output


def test_allow_files_lets_the_same_queries_run(url, tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("token\nhunter2\n")
    read = sql(url, "--allow-files", f"SELECT * FROM read_csv('{secret}')")
    assert read.exit_code == 0 and "hunter2" in read.output, read.output
    out = tmp_path / "arms.csv"
    wrote = sql(url, "--allow-files", f"COPY (SELECT name FROM arms ORDER BY name) TO '{out}'")
    assert wrote.exit_code == 0, wrote.output
    listed = sql(url, "--format", "csv", "SELECT name FROM arms ORDER BY name")
    assert out.read_text() == listed.output


def test_the_warehouse_itself_still_reads(url):
    """DuckLake reads its Parquet under the data path: that stays open."""
    from warehouse.arms import ARMS

    result = sql(url, "--format", "csv", "SELECT count(*) AS n FROM arms")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1] == str(len(ARMS))
