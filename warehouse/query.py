"""Ad-hoc SQL against the warehouse, and rendering results as a table, CSV or JSON."""
from __future__ import annotations

import csv
import io
import json
import math
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


def _jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if hasattr(value, "__float__") and not isinstance(value, (int, float, bool)):
        return float(value)  # Decimal
    return value


def render(result: Result, fmt: str) -> str:
    """Render as `table` (aligned text), `csv` or `json` (a list of objects)."""
    if fmt == "json":
        records = [dict(zip(result.columns, map(_jsonable, row))) for row in result.rows]
        return json.dumps(records, indent=2, ensure_ascii=False) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows(["" if v is None else v for v in row] for row in result.rows)
        return buf.getvalue()
    return _table(result)


def _table(result: Result) -> str:
    from warehouse.terminal import table_text

    return table_text(result)
