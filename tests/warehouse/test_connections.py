"""Connections: each works within the memory budget; one DuckDB per warehouse file per process
(connections attach the file with the row-group size), so two spellings of one path share it,
and a file this process opened some other way is waited for like another process's lock."""
from __future__ import annotations

import threading

import duckdb
import pytest
from click.testing import CliRunner

from warehouse.cli import main
from warehouse.db import connect
from warehouse.migrate import init_db


def test_two_spellings_of_one_file_share_one_database(tmp_path, monkeypatch):
    init_db(f"duckdb:///{tmp_path / 'wh.duckdb'}")
    monkeypatch.chdir(tmp_path)
    with connect("duckdb:///wh.duckdb") as a, connect(f"duckdb:///{tmp_path / 'wh.duckdb'}") as b:
        a.execute("INSERT INTO questions (question_id) VALUES ('shared?')")
        assert b.execute("SELECT count(*) FROM questions WHERE question_id = 'shared?'").fetchone() == (1,)


def test_a_file_held_by_duckdb_connect_is_waited_for(tmp_path):
    path = tmp_path / "wh.duckdb"
    init_db(f"duckdb:///{path}")
    holder = duckdb.connect(str(path))
    release = threading.Event()

    def let_go():
        release.wait()
        holder.close()

    thread = threading.Thread(target=let_go)
    thread.start()
    threading.Timer(0.5, release.set).start()
    with connect(f"duckdb:///{path}") as con:  # refused while held, then opened
        assert con.execute("SELECT count(*) FROM arms").fetchone()[0] > 0
    thread.join()


@pytest.mark.parametrize(("args", "env", "shown"), [
    ([], {}, "1.8 GiB"),  # the default, 2GB
    (["--memory-limit", "512MB"], {}, "488.2 MiB"),
    ([], {"ROLLOUT_WAREHOUSE_MEMORY_LIMIT": "1GiB"}, "1.0 GiB"),
])
def test_every_connection_works_within_the_memory_budget(tmp_path, monkeypatch, args, env, shown):
    monkeypatch.setattr("warehouse.config._memory_limit", None)  # the command line sets it for the process
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    db = str(tmp_path / "wh.duckdb")
    runner = CliRunner()
    assert runner.invoke(main, ["--db", db, "init"]).exit_code == 0
    result = runner.invoke(main, ["--db", db, *args, "sql", "SELECT current_setting('memory_limit') AS m",
                                  "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1] == shown


def test_a_memory_budget_duckdb_cannot_read_is_one_error_line(tmp_path, monkeypatch):
    monkeypatch.setattr("warehouse.config._memory_limit", None)
    result = CliRunner().invoke(main, ["--db", str(tmp_path / "wh.duckdb"), "--memory-limit", "lots", "tables"])
    assert result.exit_code == 1
    assert result.output.strip() == ("Error: --memory-limit: 'lots' is not a memory size of at least 16MB "
                                     "(e.g. 2GB, 512MB, 3GiB).")
