"""`warehouse migrate-to URL`: copy a warehouse into another engine (file <-> DuckLake).

The target is brought to the schema head first (views and arms included), then every table
is copied in ONE transaction on the target, column by column name, and each table's row
count is compared with the source's: a copy that does not add up is rolled back and reported.
"""
from __future__ import annotations

from dataclasses import dataclass

from warehouse.errors import TerminalError

SOURCE_ALIAS = "migrate_src"
SKIPPED = ("alembic_version",)  # the target's own, written by its init
CATALOG = ("arms", "questions")  # written by init too: replaced by the source's rows


@dataclass
class Copied:
    table: str
    source_rows: int
    target_rows: int


def migrate_to(source_url: str, target_url: str) -> list[Copied]:
    """Copy every table of `source_url` into `target_url` (which must hold no run data)."""
    from warehouse.config import display_name
    from warehouse.db import attach_source, connect, transaction
    from warehouse.migrate import init_db, require_head

    if source_url == target_url:
        raise TerminalError("migrate-to needs a target other than the source warehouse.")
    with connect(source_url, read_only=True) as con:
        require_head(con, source_url)
    init_db(target_url)
    with connect(target_url) as con:
        attach_source(con, source_url, SOURCE_ALIAS)
        tables = _tables(con)
        _refuse_data(con, tables, display_name(target_url))
        return transaction(con, lambda: [_copy(con, table) for table in tables])


def _tables(con) -> list[str]:
    rows = con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
                       "AND schema_name = 'main' ORDER BY table_name").fetchall()
    return [name for (name,) in rows if name not in SKIPPED]


def _refuse_data(con, tables: list[str], name: str) -> None:
    full = [t for t in tables if t not in CATALOG and con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]]
    if full:
        raise TerminalError(f"{name} already holds data ({', '.join(full)}): migrate-to copies into "
                            "an empty warehouse only. Pick a new target.")


def _copy(con, table: str) -> Copied:
    cols = [c for (c,) in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() "
        "AND table_name = ? ORDER BY column_index", [table]).fetchall()]
    names = ", ".join(f'"{c}"' for c in cols)
    con.execute(f'DELETE FROM "{table}"')
    con.execute(f'INSERT INTO "{table}" ({names}) SELECT {names} FROM {SOURCE_ALIAS}.main."{table}"')
    source_rows = con.execute(f'SELECT count(*) FROM {SOURCE_ALIAS}.main."{table}"').fetchone()[0]
    target_rows = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    if source_rows != target_rows:
        raise TerminalError(f"table {table}: {source_rows} rows in the source, {target_rows} copied; "
                            "nothing was written")
    return Copied(table, source_rows, target_rows)
