"""Ad-hoc SQL against the warehouse: a query's or the catalog's rows as a `Result`
(warehouse.terminal renders one as a table, CSV or JSON)."""
from __future__ import annotations

from dataclasses import dataclass

from warehouse.db import connect
from warehouse.errors import QueryError


@dataclass
class Result:
    columns: list[str]
    rows: list[tuple]
    types: list[str] | None = None  # DuckDB's column types, when known (numbers right-align)


def run_query(url: str, query: str, params: list | tuple | None = None) -> Result:
    """Run one statement on a read-only connection (a query can never change the data)."""
    import duckdb

    from warehouse.revision import require_head

    with connect(url, read_only=True) as con:
        require_head(con, url)
        try:
            cur = con.execute(query, params or [])
        except duckdb.Error as exc:  # every line: DuckDB's hints ('Did you mean "nodes"?') follow the first
            raise QueryError(str(exc).strip()) from None
        if cur.description is None:
            return Result([], [])
        return Result([d[0] for d in cur.description], cur.fetchall(), [str(d[1]) for d in cur.description])


def list_tables(url: str) -> Result:
    """Every table and view with its kind and row count."""
    from warehouse.revision import require_head

    with connect(url, read_only=True) as con:
        require_head(con, url)
        names = con.execute(
            "SELECT table_name, table_type FROM information_schema.tables "
            "WHERE table_schema = 'main' ORDER BY table_type, table_name"
        ).fetchall()
        rows = []
        for name, kind in names:
            quoted = '"' + name.replace('"', '""') + '"'
            try:
                n = con.execute(f"SELECT count(*) FROM {quoted}").fetchone()[0]
            except Exception as exc:  # noqa: BLE001 - a broken view still gets listed
                n = f"error: {str(exc).splitlines()[0]}"
            rows.append((name, "view" if kind == "VIEW" else "table", n))
    return Result(["name", "kind", "rows"], rows)
