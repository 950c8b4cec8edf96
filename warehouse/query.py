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


#: Statements that write files whatever the engine's file access allows (into a DuckLake's
#: own data path, say): `warehouse sql` runs them only with --allow-files.
FILE_WRITING = ("COPY", "EXPORT")


def run_query(url: str, query: str, params: list | tuple | None = None,
              allow_files: bool = False) -> Result:
    """Run one statement on a read-only connection (a query can never change the data).

    Unless `allow_files`, the query cannot touch the machine's files either: no
    read_csv('/etc/hostname'), no COPY ... TO '/any/path' (`warehouse.db.close_host_files`).
    """
    import duckdb

    from warehouse.db import close_host_files
    from warehouse.migrate import require_head

    with connect(url, read_only=True) as con:
        require_head(con, url)
        if not allow_files:
            _refuse_file_writes(con, query)
            close_host_files(con)
        try:
            cur = con.execute(query, params or [])
        except duckdb.PermissionException as exc:
            what = _first_line(exc).removeprefix("Permission Error: ").split(" - ")[0]
            raise QueryError(f"{what}: warehouse sql does not read or write the machine's files. "
                             "Pass --allow-files to let this query use them.") from None
        except duckdb.Error as exc:
            raise QueryError(_first_line(exc)) from None
        if cur.description is None:
            return Result([], [])
        return Result([d[0] for d in cur.description], cur.fetchall())


def _refuse_file_writes(con, query: str) -> None:
    import duckdb

    try:
        statements = con.extract_statements(query)
    except duckdb.Error as exc:
        raise QueryError(_first_line(exc)) from None
    for statement in statements:
        if statement.type.name in FILE_WRITING:
            raise QueryError(f"{statement.type.name} writes files: warehouse sql does not read or "
                             "write the machine's files. Pass --allow-files to let this query use them.")


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0]


def list_tables(url: str) -> Result:
    """Every table and view with its kind and row count."""
    from warehouse.migrate import require_head

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
    from rich.console import Console
    from rich.table import Table

    table = Table(show_edge=False, header_style="bold")
    for col in result.columns:
        table.add_column(col, overflow="fold")
    for row in result.rows:
        table.add_row(*("NULL" if v is None else str(v) for v in row))
    console = Console(file=io.StringIO(), width=200, force_terminal=False, color_system=None)
    console.print(table)
    console.print(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})")
    return console.file.getvalue()
