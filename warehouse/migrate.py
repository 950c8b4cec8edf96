"""Schema versioning: Alembic migrations plus the catalog (views, arms) reapplied after them.

`init`/`upgrade` bring a database to a revision; at head they also (re)apply every view in
`sql/` and upsert the arm registry, so a changed view or arm ships with the package version.
"""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from alembic.ddl.impl import DefaultImpl

from warehouse.errors import TerminalError
from warehouse.rowgroups import ROW_GROUP_SIZE
from warehouse.revision import refuse_newer, require_head  # noqa: F401 - require_head: the writers' import of it stays here


class DuckDBImpl(DefaultImpl):
    """Alembic's dialect hook for DuckDB (as duckdb_engine's documentation recommends).

    On DuckLake, which has neither indexes nor key constraints, index operations are
    skipped: one set of migrations serves both engines (docs/ducklake.md).
    """

    __dialect__ = "duckdb"
    transactional_ddl = True

    def create_index(self, index, **kw) -> None:
        if not _on_ducklake(self.dialect):
            super().create_index(index, **kw)

    def drop_index(self, index, **kw) -> None:
        if not _on_ducklake(self.dialect):
            super().drop_index(index, **kw)


def _on_ducklake(dialect) -> bool:
    return getattr(dialect, "warehouse_ducklake", False)


def _register_ducklake_ddl() -> None:
    """PRIMARY KEY and UNIQUE render as nothing on DuckLake (which rejects them); the file
    keeps them. The ingest and the trainer keep rows unique themselves (delete, then insert)."""
    from sqlalchemy.ext.compiler import compiles
    from sqlalchemy.schema import PrimaryKeyConstraint, UniqueConstraint

    for constraint in (PrimaryKeyConstraint, UniqueConstraint):
        @compiles(constraint, "duckdb")
        def _render(element, compiler, **kw):
            if _on_ducklake(compiler.dialect):
                return None
            return compiler.visit_unique_constraint(element, **kw) if isinstance(element, UniqueConstraint) \
                else compiler.visit_primary_key_constraint(element, **kw)


_register_ducklake_ddl()


MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def _config(connection):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()



def current_revision(connection) -> str | None:
    from alembic.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def _known_revision(revision: str) -> None:
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    if revision in ("head", "base") or revision.startswith(("-", "+")):
        return
    try:
        ScriptDirectory(str(MIGRATIONS_DIR)).get_revision(revision)
    except CommandError as exc:
        raise TerminalError(f"unknown schema revision {revision!r} ({exc})") from None


def upgrade(url: str, revision: str = "head") -> str | None:
    """Upgrade to `revision`; at head, reapply views and arms. Returns the new revision."""
    from alembic import command

    from warehouse.db import engine

    _known_revision(revision)
    eng = engine(url)
    try:
        with _connect(eng, url) as conn:
            refuse_newer(current_revision(conn), url)
            drop_views(conn)
            command.upgrade(_config(conn), revision)
            conn.commit()
            rev = current_revision(conn)
            if rev == head_revision():
                apply_catalog(conn)
                conn.commit()
    finally:
        eng.dispose()
    return rev


init_db = upgrade


def downgrade(url: str, revision: str) -> str | None:
    """Downgrade to `revision` (`-1`, an id, or `base`). Views are dropped first."""
    from alembic import command

    from warehouse.db import engine

    _known_revision(revision)
    eng = engine(url)
    try:
        with _connect(eng, url) as conn:
            refuse_newer(current_revision(conn), url)
            drop_views(conn)
            command.downgrade(_config(conn), revision)
            conn.commit()
            rev = current_revision(conn)
            if rev == head_revision():
                apply_catalog(conn)
                conn.commit()
    finally:
        eng.dispose()
    return rev


def _connect(eng, url: str):
    """The engine's connection; a read-only or full disk under the file is one clear line."""
    from warehouse.db import open_error

    try:
        return eng.connect()
    except Exception as exc:  # noqa: BLE001 - only disk errors are reworded, the rest re-raised
        raise open_error(getattr(exc, "orig", None) or exc, url) from None


def schema_status(url: str) -> dict:
    """Package version, database revision and head revision."""
    from warehouse import __version__
    from warehouse.db import engine

    rev = None
    if _exists(url):
        eng = engine(url, read_only=True)
        try:
            with eng.connect() as conn:
                rev = current_revision(conn)
        finally:
            eng.dispose()
        refuse_newer(rev, url)
    return {"package": __version__, "database": rev or "none (run 'warehouse init')",
            "head": head_revision(), "url": url}


def _exists(url: str) -> bool:
    from warehouse.config import db_path_from_url, is_ducklake, parse_ducklake

    if is_ducklake(url):  # a PostgreSQL catalog is asked by opening it
        target = parse_ducklake(url)
        return target.catalog != "sqlite" or os.path.exists(target.location)
    path = db_path_from_url(url)
    return path != ":memory:" and os.path.exists(path)


# --- the catalog: views and arms -----------------------------------------------------------

def view_files() -> list[tuple[str, str]]:
    """(view name, SQL text) for every `sql/*.sql`, sorted by name."""
    root = resources.files("sql")
    files = sorted(p for p in root.iterdir() if p.name.endswith(".sql"))
    return [(p.name[: -len(".sql")], p.read_text(encoding="utf-8")) for p in files]


def drop_views(conn) -> None:
    for name, _ in view_files():
        conn.exec_driver_sql(f'DROP VIEW IF EXISTS "{name}"')


def _dependency_order(files: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Views that a view's text names (as "name") come before it (stdlib graphlib).

    Order matters: a failed CREATE VIEW aborts DuckDB's transaction, so a view applied
    before one it reads cannot be retried in the same transaction.
    """
    from graphlib import CycleError, TopologicalSorter

    text_of = dict(files)
    graph = {n: {m for m in text_of if m != n and f'"{m}"' in t} for n, t in files}
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise TerminalError(f"views in sql/ reference each other in a cycle: {exc.args[1]}") from None
    return [(n, text_of[n]) for n in order]


def apply_views(conn) -> list[str]:
    """Create or replace every view, each after the views it reads."""
    applied: list[str] = []
    for name, text in _dependency_order(view_files()):
        try:
            conn.exec_driver_sql(text)
        except Exception as exc:  # noqa: BLE001 - any driver error becomes one clear line
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            raise TerminalError(f"view {name!r} in sql/{name}.sql does not apply: {reason}") from None
        applied.append(name)
    return applied


def apply_arms(conn) -> None:
    """Upsert the arm registry and the questions it names."""
    import json

    from warehouse.arms import ARMS, QUESTIONS

    for q in QUESTIONS:
        conn.exec_driver_sql("DELETE FROM questions WHERE question_id = ?", (q["question_id"],))
        conn.exec_driver_sql(
            "INSERT INTO questions VALUES (?, ?, ?, ?)",
            (q["question_id"], q["title"], q["data_root"], q["notes"]),
        )
    for arm in ARMS:
        row = arm.row()
        row["tasks"] = json.dumps(row["tasks"])
        cols = ", ".join(f'"{c}"' for c in row)
        marks = ", ".join("?" for _ in row)
        conn.exec_driver_sql('DELETE FROM arms WHERE name = ?', (arm.name,))
        conn.exec_driver_sql(f"INSERT INTO arms ({cols}) VALUES ({marks})", tuple(row.values()))


#: The placeholder of a NOT NULL column in `prime_lake_stats`'s row, by type (other columns get NULL).
_PLACEHOLDERS = {"VARCHAR": "''", "JSON": "'null'", "BOOLEAN": "false", "TIMESTAMP": "TIMESTAMP '1970-01-01'",
                 "INTEGER": "0", "BIGINT": "0", "HUGEINT": "0", "DOUBLE": "0", "FLOAT": "0",
                 "INTEGER[]": "[]", "DOUBLE[]": "[]", "FLOAT[]": "[]"}


def prime_lake_stats(conn) -> list[str]:
    """Give every empty DuckLake table statistics, so that planning a query over it stops
    asking the catalog; returns the tables primed. Nothing to do on the file.

    DuckLake (the extension of DuckDB 1.5.5) keeps a table's statistics in memory once the
    table has held a row; for a table that never did, planning asks the catalog again for
    every column a query reads, on every query (~3 ms a column; duckdb/ducklake#1313 caches the
    empty answer upstream). A warehouse without reward-model runs or step metrics keeps such
    tables for good, and the dashboard's run page read them in most of its statements (on a
    lake whose steps, step_metrics and run_lifecycle were empty: 0.87-0.91 s, 0.46-0.52 s once
    primed; benchmarks/RESULTS.md). Each empty table takes one placeholder row and loses it
    again in the caller's transaction: it stays empty, with statistics from then on."""
    if not _on_ducklake(conn.dialect):
        return []
    columns: dict[str, list] = {}
    for table, _column, kind, nullable in conn.exec_driver_sql(
            "SELECT table_name, column_name, data_type, is_nullable FROM duckdb_columns() WHERE database_name = "
            "current_database() AND table_name IN (SELECT table_name FROM duckdb_tables() WHERE database_name = "
            "current_database()) ORDER BY table_name, column_index").fetchall():
        columns.setdefault(table, []).append((kind, nullable))
    held = " UNION ALL ".join(f"SELECT '{t}' WHERE EXISTS (SELECT 1 FROM \"{t}\")" for t in columns)
    empty = set(columns) - {t for (t,) in conn.exec_driver_sql(held).fetchall()} if columns else set()
    primed = []
    for table in sorted(empty):
        if any(not nullable and kind not in _PLACEHOLDERS for kind, nullable in columns[table]):
            continue  # a NOT NULL column of a type without a placeholder: left as it is
        values = ", ".join(f"CAST({'NULL' if nullable else _PLACEHOLDERS[kind]} AS {kind})"
                           for kind, nullable in columns[table])
        conn.exec_driver_sql(f'INSERT INTO "{table}" VALUES ({values})')
        conn.exec_driver_sql(f'DELETE FROM "{table}"')
        primed.append(table)
    return primed


#: DuckLake options the warehouse sets on a lake at `warehouse init` and every `warehouse
#: upgrade` (files written before keep their codec until `warehouse compact` rewrites them).
#: zstd: the 1.3 GB root's token index files rewritten so were 0.63-0.64x of snappy's
#: (DuckLake's default); benchmarks/RESULTS.md has the lake's size with each.
LAKE_OPTIONS = {"parquet_compression": "zstd"}

#: A lake's payloads: a read of one payload decompresses its row group's column chunks whole
#: (a 32 MB file of the 1.3 GB root's payloads in one row group of 2,704 rows: 203 MB a column,
#: and `warehouse token` ran out of its memory share), so row groups of 256 payloads (DuckDB
#: keeps an insert's chunk whole: an ingest's commit writes one of 384-864). Files of 32 MB:
#: every data file adds rows to the catalog's column statistics, which DuckLake reads whole
#: for every filtered scan, and a merge holds an output row group's arrays in memory (the
#: root's 20 files merged into 32 MB files in 8.5 s at 0.8 GB peak RSS; in one row group a
#: file, 2.4 GB; into DuckDB's default 512 MB files, out of the 2 GB budget).
PAYLOAD_ROW_GROUP_SIZE = 256
PAYLOAD_FILE_SIZE = "32MB"

#: DuckLake options of one table, set as LAKE_OPTIONS are. The token index in row groups of
#: 2,048 rows, as on the file, not DuckDB's 122,880: a lookup reads, from the file of each
#: write that holds its token id's range, the row group that holds it, and the 1.3 GB root's
#: index files were one row group of ~12,900 rows (8.2 MB) each, 33 of them read for one id
#: at 30x (benchmarks/RESULTS.md). The payloads in row groups of PAYLOAD_ROW_GROUP_SIZE and
#: files of up to PAYLOAD_FILE_SIZE, which is what `warehouse compact` merges them into.
LAKE_TABLE_OPTIONS = {"node_token_index": {"parquet_row_group_size": ROW_GROUP_SIZE},
                      "node_payloads": {"parquet_row_group_size": PAYLOAD_ROW_GROUP_SIZE,
                                        "target_file_size": PAYLOAD_FILE_SIZE}}


def set_lake_options(conn) -> None:
    """LAKE_OPTIONS and LAKE_TABLE_OPTIONS on the lake, stored in its catalog for every writer.
    Nothing to do on the file."""
    from warehouse.db import LAKE_ALIAS

    if not _on_ducklake(conn.dialect):
        return
    for name, value in LAKE_OPTIONS.items():
        conn.exec_driver_sql(f"CALL {LAKE_ALIAS}.set_option('{name}', '{value}')")
    for table in LAKE_TABLE_OPTIONS:
        for statement in lake_table_options(table):
            conn.exec_driver_sql(statement)


def lake_table_options(table: str) -> list[str]:
    """The statements that set `table`'s LAKE_TABLE_OPTIONS on the lake."""
    from warehouse.db import LAKE_ALIAS

    return [f"CALL {LAKE_ALIAS}.set_option('{name}', '{value}', table_name => '{table}')"
            for name, value in LAKE_TABLE_OPTIONS.get(table, {}).items()]


def apply_catalog(conn) -> None:
    apply_arms(conn)
    apply_views(conn)
    prime_lake_stats(conn)
    set_lake_options(conn)
