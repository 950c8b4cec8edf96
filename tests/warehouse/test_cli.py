"""The `warehouse` CLI through click's CliRunner: help everywhere, clear one-line errors."""
from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from warehouse.arms import ARMS
from warehouse.cli import main as warehouse_main


def walk(group: click.Group, prefix=()):
    for name, cmd in group.commands.items():
        yield prefix + (name,), cmd
        if isinstance(cmd, click.Group):
            yield from walk(cmd, prefix + (name,))


def all_commands():
    from train.cli import main as train_main

    for root_name, root in (("warehouse", warehouse_main), ("train", train_main)):
        yield (root_name,), root
        for path, cmd in walk(root):
            yield (root_name, *path), cmd


@pytest.mark.parametrize("path,cmd", list(all_commands()), ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_every_command_has_help(path, cmd):
    assert (cmd.help or "").strip(), f"{' '.join(path)} has no help text"
    root = warehouse_main if path[0] == "warehouse" else None
    if root is not None:
        result = CliRunner().invoke(root, [*path[1:], "--help"])
        assert result.exit_code == 0, result.output
        assert "Usage:" in result.output


def test_init_then_arms_lists_every_arm_with_caps(tmp_path):
    db = str(tmp_path / "x.duckdb")
    runner = CliRunner()
    assert runner.invoke(warehouse_main, ["--db", db, "init"]).exit_code == 0
    result = runner.invoke(
        warehouse_main,
        ["--db", db, "sql", "SELECT name, prompt_cap, response_cap, total_cap FROM arms", "--format", "json"],
    )
    assert result.exit_code == 0, result.output
    rows = {r["name"]: (r["prompt_cap"], r["response_cap"], r["total_cap"]) for r in json.loads(result.output)}
    assert rows == {a.name: (a.prompt_cap, a.response_cap, a.total_cap) for a in ARMS}
    assert rows["hr24k_u6"] == (12288, 24576, 36864)
    assert rows["hr16k"] == (8192, 16384, 24576)


def test_db_from_environment_variable(tmp_path, monkeypatch):
    db = tmp_path / "env.duckdb"
    monkeypatch.setenv("ROLLOUT_WAREHOUSE_DB", str(db))
    assert CliRunner().invoke(warehouse_main, ["init"]).exit_code == 0
    assert db.exists()


def test_default_db_is_in_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(warehouse_main, ["init"]).exit_code == 0
    assert (tmp_path / "warehouse.duckdb").exists()


@pytest.mark.parametrize("fmt,check", [
    ("csv", lambda out: out.splitlines()[0] == "a,b" and out.splitlines()[1] == "1,x"),
    ("json", lambda out: json.loads(out) == [{"a": 1, "b": "x"}]),
    ("table", lambda out: "a" in out and "(1 row)" in out),
])
def test_sql_formats(db_url, fmt, check):
    db = db_url.removeprefix("duckdb:///")
    result = CliRunner().invoke(warehouse_main, ["--db", db, "sql", "SELECT 1 AS a, 'x' AS b", "--format", fmt])
    assert result.exit_code == 0, result.output
    assert check(result.output)


def test_sql_is_read_only(db_url):
    db = db_url.removeprefix("duckdb:///")
    result = CliRunner().invoke(warehouse_main, ["--db", db, "sql", "DELETE FROM arms"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ")


@pytest.mark.parametrize("args,needle", [
    (["downgrade", "zz"], "unknown schema revision"),
])
def test_errors_are_one_line(db_url, args, needle):
    db = db_url.removeprefix("duckdb:///")
    result = CliRunner().invoke(warehouse_main, ["--db", db, *args])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and result.output.startswith("Error: ")
    assert needle in result.output
    assert "Traceback" not in result.output


def test_sql_error_keeps_duckdbs_hints(db_url):
    db = db_url.removeprefix("duckdb:///")
    result = CliRunner().invoke(warehouse_main, ["--db", db, "sql", "SELECT * FROM node"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    first, *rest = result.output.splitlines()
    assert first == "Error: Catalog Error: Table with name node does not exist!"
    assert 'Did you mean "nodes"?' in rest and "LINE 1: SELECT * FROM node" in rest


@pytest.mark.parametrize("url", ["postgres://x", "sqlite:///x.db", "s3://bucket/warehouse.duckdb",
                                 "mysql+pymysql://u@h/db", "duckdb://wh.duckdb"])
def test_an_unsupported_url_is_one_error_line_naming_what_works(tmp_path, url):
    result = CliRunner().invoke(warehouse_main, ["--db", url, "tables"])
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"Error: unsupported warehouse URL {url!r}")
    assert "duckdb:///PATH" in result.output and "ducklake:sqlite:PATH" in result.output


def test_missing_database_names_the_fix(tmp_path):
    result = CliRunner().invoke(warehouse_main, ["--db", str(tmp_path / "none.duckdb"), "tables"])
    assert result.exit_code == 1
    assert "warehouse" in result.output and "init" in result.output
    assert not (tmp_path / "none.duckdb").exists()


def test_old_schema_asks_for_upgrade(tmp_path):
    db = str(tmp_path / "old.duckdb")
    runner = CliRunner()
    runner.invoke(warehouse_main, ["--db", db, "init"])
    runner.invoke(warehouse_main, ["--db", db, "downgrade", "-1"])
    result = runner.invoke(warehouse_main, ["--db", db, "sql", "SELECT 1"])
    assert result.exit_code == 1
    assert "Run 'warehouse upgrade'" in result.output


def test_version_reports_revisions(db_url):
    from warehouse.migrate import head_revision

    db = db_url.removeprefix("duckdb:///")
    result = CliRunner().invoke(warehouse_main, ["--db", db, "version"])
    assert result.exit_code == 0
    assert f"database: {head_revision()}" in result.output


def test_help_does_not_import_heavy_modules():
    import subprocess
    import sys

    code = (
        "import sys; from click.testing import CliRunner; from warehouse.cli import main; "
        "CliRunner().invoke(main, ['--help']); "
        "print(sorted(m for m in ('torch','duckdb','pandas','great_expectations','transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
