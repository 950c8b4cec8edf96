"""A warehouse written by a newer rollout-warehouse (its alembic_version is a revision this
package has no migration for): every command refuses it with one line naming the real fix,
a newer package; 'warehouse upgrade' cannot help, and nothing is changed."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from warehouse.cli import main
from warehouse.config import resolve_db_url
from warehouse.migrate import head_revision

NEWER = "0099"


def at_newer_revision(url: str) -> str:
    from warehouse.db import connect

    with connect(url) as con:
        con.execute("UPDATE alembic_version SET version_num = ?", [NEWER])
    return url


@pytest.fixture
def newer_file(db_url) -> str:
    return at_newer_revision(db_url)


@pytest.fixture
def newer_lake(tmp_path) -> str:
    from warehouse.migrate import init_db

    url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'cat.sqlite'}", tmp_path / "files")
    init_db(url)
    return at_newer_revision(url)


def commands(tmp_path) -> list[list[str]]:
    from ingest.sample import write_sample_root

    root = write_sample_root(tmp_path / "root", seed=0)
    return [["init"], ["upgrade"], ["upgrade", "0003"], ["downgrade", "-1"], ["downgrade", "base"],
            ["version"], ["tables"], ["sql", "SELECT 1"], ["metrics"], ["check"],
            ["report", "20260702_020809", "--out", str(tmp_path / "report")],
            ["export", str(tmp_path / "export")], ["ingest", str(root)],
            ["serve", "--port", "0"], ["demo", "--out", str(tmp_path / "demo"), "-q"],
            ["migrate-to", str(tmp_path / "copy.duckdb")]]


def assert_refused(url: str, args: list[str]) -> None:
    result = CliRunner().invoke(main, ["--db", url, *args])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1, (args, result.output)
    assert len(lines) == 1, (args, result.output)
    assert f"is at schema {NEWER}, newer than this package's {head_revision()}: install a newer " \
           "rollout-warehouse" in lines[0], (args, lines[0])
    assert lines[0].startswith("Error: ")


def revision(url: str) -> str:
    from warehouse.db import connect

    with connect(url, read_only=True) as con:
        return con.execute("SELECT version_num FROM alembic_version").fetchone()[0]


def test_every_command_refuses_a_newer_file_warehouse(newer_file, tmp_path):
    for args in commands(tmp_path):
        assert_refused(newer_file, args)
    assert revision(newer_file) == NEWER  # nothing moved it


def test_a_newer_ducklake_warehouse_is_refused_the_same_way(newer_lake, tmp_path):
    for args in (["init"], ["upgrade"], ["downgrade", "-1"], ["version"], ["sql", "SELECT 1"],
                 ["tables"]):
        assert_refused(newer_lake, args)
    assert revision(newer_lake) == NEWER


def test_a_newer_migration_target_is_refused(db_url, tmp_path):
    from warehouse.migrate import init_db

    target = resolve_db_url(tmp_path / "target.duckdb")
    init_db(target)
    at_newer_revision(target)
    assert_refused(db_url, ["migrate-to", target])
