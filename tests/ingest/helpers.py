"""Small helpers shared by the ingest tests."""
from __future__ import annotations

from pathlib import Path

import duckdb


_TEMPLATE: list[Path] = []  # set once per session by conftest's `_db_template`


def make_db(tmp_path: Path, name: str = "wh.duckdb") -> str:
    """A fresh warehouse at schema head: a copy of one migrated template (migrations are slow)."""
    import shutil

    shutil.copy(_TEMPLATE[0], tmp_path / name)
    return f"duckdb:///{tmp_path / name}"


def rows(url: str, sql: str, params=None) -> list[tuple]:
    con = duckdb.connect(url[len("duckdb:///"):], read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def table_dump(url: str, table: str, drop: tuple[str, ...] = ()) -> list[tuple]:
    """Every row of `table` (minus columns in `drop`), sorted, for equality checks."""
    con = duckdb.connect(url[len("duckdb:///"):], read_only=True)
    try:
        cols = [c for (c,) in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index",
            [table]).fetchall() if c not in drop]
        quoted = ", ".join(f'"{c}"' for c in cols)
        return con.execute(f'SELECT {quoted} FROM "{table}" ORDER BY ALL').fetchall()
    finally:
        con.close()
