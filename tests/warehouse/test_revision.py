"""The read-only commands check the schema revision without Alembic: the text reading of
migrations/versions/ agrees with Alembic's, and `sql`, `tables`, `metrics` never import it."""
from __future__ import annotations

import subprocess
import sys

import pytest

from warehouse import migrate, revision
from warehouse.errors import TerminalError


def test_head_from_the_files_is_alembics_head():
    assert revision.head_revision() == migrate.head_revision()


def test_two_heads_are_an_error(tmp_path):
    for name, rev, down in (("a.py", "0001", "None"), ("b.py", "0002", '"0001"'), ("c.py", "0003", '"0001"')):
        (tmp_path / name).write_text(f'revision = "{rev}"\ndown_revision = {down}\n')
    with pytest.raises(TerminalError, match="2 heads"):
        revision.head_revision(tmp_path)
    (tmp_path / "d.py").write_text('revision: str = "0004"\ndown_revision: str | None = ("0002", "0003")\n')
    assert revision.head_revision(tmp_path) == "0004"  # a merge revises both


@pytest.mark.parametrize("args", [["sql", "SELECT 1"], ["tables"], ["metrics"]])
def test_read_only_commands_do_not_import_the_migration_stack(tmp_path, args):
    db = tmp_path / "wh.duckdb"
    migrate.init_db(f"duckdb:///{db}")
    code = ("import sys; from click.testing import CliRunner; from warehouse.cli import main; "
            f"r = CliRunner().invoke(main, ['--db', {str(db)!r}, *{args!r}]); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('alembic', 'sqlalchemy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("lake", [False, True])
def test_the_schema_check_reads_the_stored_revision_or_names_the_fix(tmp_path, lake):
    """An empty warehouse (no alembic_version), one without its row, an older one and a
    newer one each get their own message; a warehouse at head passes."""
    from warehouse.config import resolve_db_url
    from warehouse.db import connect
    from warehouse.errors import SchemaVersionError

    url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'c.sqlite'}" if lake else tmp_path / "wh.duckdb",
                         tmp_path / "files" if lake else None)
    with connect(url) as con:
        with pytest.raises(SchemaVersionError, match="no warehouse schema yet. Run 'warehouse init'"):
            revision.require_head(con, url)
        con.execute('CREATE TABLE "alembic_version" ("version_num" VARCHAR)')
        with pytest.raises(SchemaVersionError, match="no warehouse schema yet"):
            revision.require_head(con, url)
        con.execute("INSERT INTO alembic_version VALUES ('0001')")
        with pytest.raises(SchemaVersionError, match=f"at schema 0001, this version needs {revision.head_revision()}"):
            revision.require_head(con, url)
        con.execute("UPDATE alembic_version SET version_num = '9999'")
        with pytest.raises(SchemaVersionError, match="newer than this package"):
            revision.require_head(con, url)
        con.execute("UPDATE alembic_version SET version_num = ?", [revision.head_revision()])
        revision.require_head(con, url)
