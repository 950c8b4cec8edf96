"""The schema revision a read-only command needs, without the migration stack.

`warehouse sql`, `tables`, `metrics`, `check`, `report` and `export` only read: they ask the
database's `alembic_version` with a plain DuckDB query and compare it with the newest
migration file's `revision`, read from `migrations/versions/` as text. Importing Alembic (and
SQLAlchemy under it) took about a second of `warehouse sql 'SELECT 1'`; only the commands that
migrate (`init`, `upgrade`, `downgrade`) and the writers load it. tests/warehouse/test_revision.py
holds this reading equal to Alembic's own.
"""
from __future__ import annotations

import re
from pathlib import Path

from warehouse.errors import SchemaVersionError, TerminalError

VERSIONS_DIR = Path(__file__).resolve().parent.parent / "migrations" / "versions"
_REVISION = re.compile(r"""^revision\s*(?::[^=]+)?=\s*["']([^"']+)["']""", re.M)
_DOWN = re.compile(r"^down_revision\s*(?::[^=]+)?=\s*(.+)$", re.M)
_QUOTED = re.compile(r"""["']([^"']+)["']""")


def head_revision(versions_dir: Path = VERSIONS_DIR) -> str:
    """The one revision no other migration revises (Alembic's head)."""
    revisions, revised = set(), set()
    for path in versions_dir.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        if (rev := _REVISION.search(text)) is None:
            continue  # __init__.py
        revisions.add(rev.group(1))
        if (down := _DOWN.search(text)) is not None:
            revised.update(_QUOTED.findall(down.group(1)))
    heads = sorted(revisions - revised)
    if len(heads) != 1:
        raise TerminalError(f"migrations/versions/ has {len(heads)} heads ({', '.join(heads) or 'none'}); "
                            "it needs exactly one.")
    return heads[0]


def known_revisions(versions_dir: Path = VERSIONS_DIR) -> set[str]:
    """Every revision this package has a migration for."""
    return {rev.group(1) for path in versions_dir.glob("*.py")
            if (rev := _REVISION.search(path.read_text(encoding="utf-8"))) is not None}


def refuse_newer(rev: str | None, url: str) -> None:
    """A warehouse at a revision this package has no migration for was made by a newer
    version: no command of this one may read or move it (upgrading cannot help)."""
    if rev is not None and rev not in known_revisions():
        from warehouse.config import display_name

        raise SchemaVersionError(
            f"{display_name(url)} is at schema {rev}, newer than this package's {head_revision()}: "
            "install a newer rollout-warehouse (pip install -U rollout-warehouse)")


def require_head(con, url: str) -> None:
    """Raise a clear error unless the (raw DuckDB) connection's schema is at head."""
    from warehouse.config import display_name

    name = display_name(url)
    head = head_revision()
    rev = _stored_revision(con)
    if rev is None:
        raise SchemaVersionError(f"{name} has no warehouse schema yet. Run 'warehouse init'.")
    refuse_newer(rev[0], url)
    if rev[0] != head:
        raise SchemaVersionError(
            f"{name} is at schema {rev[0]}, this version needs {head}. Run 'warehouse upgrade'."
        )


def _stored_revision(con) -> tuple | None:
    """alembic_version's row, None when the table is not there or is empty. Read straight:
    asking duckdb_tables() first made DuckLake load every table's statistics (0.1-0.2 s of
    each command on a lake)."""
    import duckdb

    try:
        return con.execute('SELECT "version_num" FROM "alembic_version"').fetchone()
    except duckdb.CatalogException:
        return None
