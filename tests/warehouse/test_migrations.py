"""Migrations produce exactly the models' schema, and every step round-trips without loss.

SQLAlchemy's reflection does not work on DuckDB 2 (duckdb_engine queries pg_catalog tables
DuckDB lacks), so schemas are compared through DuckDB's own catalog functions.
"""
from __future__ import annotations

import duckdb
import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory

from warehouse import migrate
from warehouse.schema import metadata


def catalog(path) -> dict:
    """Columns, constraints and indexes of every table but alembic_version."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        skip = (
            "table_name <> 'alembic_version' AND schema_name = 'main' "
            "AND table_name IN (SELECT table_name FROM duckdb_tables() WHERE NOT internal)"
        )
        columns = con.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default, comment "
            f"FROM duckdb_columns() WHERE {skip} ORDER BY ALL"
        ).fetchall()
        constraints = con.execute(
            "SELECT table_name, constraint_type, list_sort(constraint_column_names) "
            f"FROM duckdb_constraints() WHERE {skip} ORDER BY ALL"
        ).fetchall()
        indexes = con.execute(
            "SELECT table_name, index_name, is_unique, expressions "
            f"FROM duckdb_indexes() WHERE {skip} ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()
    return {"columns": columns, "constraints": constraints, "indexes": indexes}


def models_catalog(tmp_path) -> dict:
    path = tmp_path / "models.duckdb"
    engine = sa.create_engine(f"duckdb:///{path}")
    metadata.create_all(engine)  # tests only: production goes through Alembic
    engine.dispose()
    return catalog(path)


def revisions() -> list[str]:
    script = ScriptDirectory(str(migrate.MIGRATIONS_DIR))
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def test_upgrade_to_head_equals_models(tmp_path):
    url = f"duckdb:///{tmp_path / 'mig.duckdb'}"
    assert migrate.upgrade(url) == migrate.head_revision()
    migrated = catalog(tmp_path / "mig.duckdb")
    expected = models_catalog(tmp_path)
    assert migrated["columns"] == expected["columns"]
    assert migrated["constraints"] == expected["constraints"]
    assert migrated["indexes"] == expected["indexes"]
    assert {row[0] for row in migrated["columns"]} == set(metadata.tables)


def test_revisions_form_one_linear_history():
    script = ScriptDirectory(str(migrate.MIGRATIONS_DIR))
    assert len(script.get_heads()) == 1
    assert revisions()[0] == "0001"


@pytest.mark.parametrize("revision", revisions())
def test_each_migration_downgrades_and_upgrades_without_loss(tmp_path, revision):
    path = tmp_path / "rt.duckdb"
    url = f"duckdb:///{path}"
    migrate.upgrade(url, revision)
    before = catalog(path)
    _insert_run(path)
    migrate.downgrade(url, "-1")
    migrate.upgrade(url, revision)
    assert catalog(path) == before
    # Rows of tables older than this migration survive its downgrade/upgrade; 0001 itself
    # creates `runs`, so its round trip necessarily starts empty.
    con = duckdb.connect(str(path), read_only=True)
    expected = [] if revision == revisions()[0] else [("r1", False)]
    assert con.execute("SELECT run_id, lost FROM runs").fetchall() == expected
    con.close()


def _insert_run(path) -> None:
    con = duckdb.connect(str(path))
    con.execute("INSERT INTO runs (run_id, kind, lost) VALUES ('r1', 'training', false)")
    con.close()


def test_full_history_down_to_base_and_back(tmp_path):
    path = tmp_path / "full.duckdb"
    url = f"duckdb:///{path}"
    migrate.upgrade(url)
    head = catalog(path)
    assert migrate.downgrade(url, "base") is None
    assert catalog(path)["columns"] == []
    migrate.upgrade(url)
    assert catalog(path) == head


def test_upgrade_is_idempotent_and_reapplies_catalog(tmp_path):
    url = f"duckdb:///{tmp_path / 'idem.duckdb'}"
    migrate.upgrade(url)
    migrate.upgrade(url)
    con = duckdb.connect(str(tmp_path / "idem.duckdb"), read_only=True)
    n_arms = con.execute("SELECT count(*) FROM arms").fetchone()[0]
    views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    con.close()
    from warehouse.arms import ARMS

    assert n_arms == len(ARMS)
    assert views == {name for name, _ in migrate.view_files()}


def test_views_apply_after_the_views_they_read_and_cycles_are_named(monkeypatch):
    files = [("b", 'CREATE VIEW "b" AS SELECT * FROM "a"'), ("a", 'CREATE VIEW "a" AS SELECT 1 AS x')]
    assert [name for name, _ in migrate._dependency_order(files)] == ["a", "b"]
    cycle = [("a", 'SELECT * FROM "b"'), ("b", 'SELECT * FROM "a"')]
    with pytest.raises(migrate.TerminalError, match="cycle"):
        migrate._dependency_order(cycle)


def test_a_broken_view_is_one_line_naming_its_file(tmp_path, monkeypatch):
    url = f"duckdb:///{tmp_path / 'v.duckdb'}"
    migrate.upgrade(url)
    monkeypatch.setattr(migrate, "view_files", lambda: [("bad", 'CREATE OR REPLACE VIEW "bad" AS SELECT * FROM "nope"')])
    with pytest.raises(migrate.TerminalError, match=r"view 'bad' in sql/bad.sql does not apply: .*nope") as err:
        migrate.upgrade(url)
    assert "\n" not in str(err.value)


def test_0009_adds_settings_sources_to_a_warehouse_at_0008_and_its_runs_read_as_before(tmp_path):
    """A warehouse with a run at 0008 gains runs.settings_sources (NULL for that run), and the
    run page's settings fall back to "override" for its overrides."""
    import json

    from warehouse.db import connect
    from warehouse.serve.details import settings

    path = tmp_path / "old.duckdb"
    url = f"duckdb:///{path}"
    assert migrate.upgrade(url, "0008") == "0008"
    con = duckdb.connect(str(path))
    con.execute("INSERT INTO runs (run_id, kind, lost, arm, overrides) VALUES ('r1', 'training', false, "
                "'hr24k_u6', ?)", [json.dumps({"response_cap": 512, "kl_coef": 0.01})])
    con.close()
    assert migrate.upgrade(url) == migrate.head_revision()
    with connect(url, read_only=True) as con:
        assert con.execute("SELECT run_id, arm, overrides, settings_sources FROM runs").fetchall() == [
            ("r1", "hr24k_u6", json.dumps({"response_cap": 512, "kl_coef": 0.01}), None)]
        shown = settings(con, "r1")
    assert {s["key"]: s["source"] for s in shown["knobs"]} == {"kl_coef": "override"}
    assert {s["key"]: s["source"] for s in shown["arm"]}["response_cap"] == "override"
    migrate.downgrade(url, "0008")
    con = duckdb.connect(str(path), read_only=True)
    columns = [r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'runs'").fetchall()]
    con.close()
    assert "settings_sources" not in columns and "overrides" in columns
