"""Ad-hoc SQL against the warehouse: a query's or the catalog's rows as a `Result`
(warehouse.terminal renders one as a table, CSV or JSON)."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from warehouse.db import connect
from warehouse.errors import QueryError


@dataclass
class Result:
    columns: list[str]
    rows: list[tuple]
    types: list[str] | None = None  # DuckDB's column types, when known (numbers right-align)


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
    from warehouse.revision import require_head

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
        except duckdb.Error as exc:  # every line: DuckDB's hints ('Did you mean "nodes"?') follow the first
            raise QueryError(str(exc).strip()) from None
        if cur.description is None:
            return Result([], [])
        return Result([d[0] for d in cur.description], cur.fetchall(), [str(d[1]) for d in cur.description])


def _refuse_file_writes(con, query: str) -> None:
    import duckdb

    try:
        statements = con.extract_statements(query)
    except duckdb.Error as exc:  # a parse error's hints follow its first line too
        raise QueryError(str(exc).strip()) from None
    for statement in statements:
        if statement.type.name in FILE_WRITING:
            raise QueryError(f"{statement.type.name} writes files: warehouse sql does not read or "
                             "write the machine's files. Pass --allow-files to let this query use them.")


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0]


# Views counted from the tables they are built on, without planning them. node_tokens has one
# row per token id of a payload whose node is present (sql/node_tokens.sql), so its count is
# the sum of those arrays' lengths, which nodes keep as n_response_tokens
# (len(response_token_ids), set at load time): summed over the nodes whose payload row is
# present, only the payloads' key columns are read (summing the arrays' own lengths read every
# payload: 2.6 s on a warehouse of 598 M tokens; counting the view unrolls every array).
# node_parents has one row per node with a parent_id (its parent lookup is grouped by that
# node, then left-joined): 0.15-0.5 s of `warehouse tables` at 10x of the 1.3 GB root.
COUNTED_FROM_TABLES = {
    "node_tokens": 'SELECT coalesce(sum(n."n_response_tokens"), 0) FROM "nodes" AS n '
                   'WHERE EXISTS (SELECT 1 FROM "node_payloads" AS p '
                   'WHERE p."source_id" = n."source_id" AND p."line_no" = n."line_no")',
    "node_parents": 'SELECT count(*) FROM "nodes" WHERE "parent_id" IS NOT NULL',
}

# Views whose rows are the rows of a `keys` CTE (the union of the key columns of the tables
# under them), each left-joined to at most one row of every other part: counted as the
# distinct COLUMNS of the `keys` CTE of sql/SOURCE.sql, read from that file, so the grain is
# said once, in the view. decision_rule's task_round_means is task_round_metrics' keys with a
# mean each; round_task_means groups task_round_metrics by run round. Computing them to count
# them took 0.06-0.38 s each on a file of 35 runs and 146 K nodes, 0.8 s of `warehouse tables`.
COUNTED_AS_KEYS = {
    "run_metrics": ("run_metrics", "*"),
    "round_metrics": ("round_metrics", "*"),
    "task_round_metrics": ("task_round_metrics", "*"),
    "decision_rule": ("task_round_metrics", "*"),
    "round_task_means": ("task_round_metrics", '"run_id", "round"'),
}


@functools.cache
def keys_cte(view: str) -> str:
    """The WITH clause of sql/VIEW.sql up to and with its `keys AS (...)` CTE: the view's key
    union, and the CTEs before it, which the union may read (a view that reads nodes once reads
    them there); each file read once."""
    from importlib import resources

    text = (resources.files("sql") / f"{view}.sql").read_text()
    match = re.search(r"^keys AS \(", text, re.MULTILINE)
    if match is None:
        raise ValueError(f"sql/{view}.sql has no `keys AS (` CTE at the start of a line")
    opening = re.search(r"^WITH$", text[: match.start()], re.MULTILINE)
    if opening is None:
        raise ValueError(f"sql/{view}.sql: no `WITH` line before its `keys` CTE")
    depth, start = 1, match.end()
    for end in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        if depth == 0:
            return text[opening.start():end + 1]
    raise ValueError(f"sql/{view}.sql: the `keys` CTE's parenthesis is not closed")


COUNTED_FROM_TABLES |= {
    view: f"{keys_cte(source)} SELECT count(*) FROM (SELECT DISTINCT {columns} FROM keys)"
    for view, (source, columns) in COUNTED_AS_KEYS.items()
}

# Views with no row while a table is empty: counted 0 without planning them. logprob_mismatch
# reads only trained nodes, but its join starts reading the payloads (a row group of arrays,
# 0.5-0.8 s) before it finds there are none.
EMPTY_WITHOUT = {"logprob_mismatch": "node_train_tokens"}


def list_tables(url: str) -> Result:
    """Every table and view with its kind and row count; on DuckLake, a view's grain (what one
    of its rows is, from its file's header in sql/) in place of its count.

    Counts never unroll the token arrays or compute a metric: node_tokens and node_parents are
    counted from the tables under them (COUNTED_FROM_TABLES; node_tokens as a sum of the nodes'
    stored lengths, so no payload is read), the metric views of one row per run, run round or
    task-round as their keys (COUNTED_AS_KEYS), and logprob_mismatch is 0 unread while nothing is trained
    (EMPTY_WITHOUT). A table's count(*) reads no rows on either engine (DuckDB's row counts;
    DuckLake's Parquet footers and delete files). On DuckLake every other view is listed with
    its grain and not counted (rows NULL): counting one plans it against the catalog, hundreds
    of catalog queries for the larger views, seconds each (`warehouse tables` prints
    LAKE_VIEWS_NOT_COUNTED below the table).
    """
    from warehouse.db import is_ducklake_connection
    from warehouse.revision import require_head

    with connect(url, read_only=True) as con:
        require_head(con, url)
        lake = is_ducklake_connection(con)
        names = (lake and _lake_names(con)) or con.execute(LISTING).fetchall()
        if not lake:
            rows = [(name, "view" if kind == "VIEW" else "table", _count(con, name)) for name, kind in names]
            return Result(["name", "kind", "rows"], rows)
        counted = [name for name, kind in names if kind != "VIEW" or name in COUNTED_FROM_TABLES]
        counts = _count_together(con, counted)
        rows = [(name, "view" if kind == "VIEW" else "table", counts.get(name),
                 view_grain(name) if kind == "VIEW" and name not in COUNTED_FROM_TABLES else None)
                for name, kind in names]
    return Result(["name", "kind", "rows", "grain"], rows)


#: every table and view of the warehouse: (name, 'BASE TABLE' or 'VIEW'), tables first, by name
LISTING = ("SELECT table_name, table_type FROM information_schema.tables "
           "WHERE table_schema = 'main' ORDER BY table_type, table_name")


def _lake_names(con) -> list[tuple[str, str]] | None:
    """LISTING's rows on DuckLake from DuckLake's own table list and duckdb_views():
    information_schema.tables made DuckLake load every table's statistics from the catalog
    first (0.06-0.1 s of `warehouse tables`). None when the lake has a schema besides main,
    as ducklake_table_info lists every schema's tables."""
    others = con.execute("SELECT count(*) FROM duckdb_schemas() WHERE database_name = current_database() "
                         "AND schema_name <> 'main'").fetchone()[0]
    if others:
        return None
    tables = con.execute("SELECT table_name, 'BASE TABLE' FROM ducklake_table_info(current_database())").fetchall()
    views = con.execute("SELECT view_name, 'VIEW' FROM duckdb_views() WHERE database_name = current_database() "
                        "AND schema_name = 'main' AND NOT internal").fetchall()
    return sorted(tables + views, key=lambda row: (row[1], row[0]))


LAKE_VIEWS_NOT_COUNTED = (f"Views but {', '.join(sorted(COUNTED_FROM_TABLES))} (counted from tables) are not "
                          "counted on DuckLake (rows empty): "
                          "counting one plans it against the catalog, seconds a view. Count one with: "
                          "warehouse sql 'SELECT count(*) FROM \"VIEW\"'")


def view_grain(name: str) -> str | None:
    """What one row of the view is ("one row per ..."): sql/<name>.sql's header comment after
    the view's name, up to its first full stop or colon; None for a view with no file there."""
    from importlib import resources

    path = resources.files("sql") / f"{name}.sql"
    if not path.is_file():
        return None
    head = []
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.removeprefix("--").strip()
        if not line.startswith("--") or not text:
            break
        head.append(text)
    _, _, grain = " ".join(head).partition(": ")
    return re.split(r"[.:](?:\s|$)", grain, maxsplit=1)[0] or None  # up to its first sentence's end or colon


def _count_together(con, names: list[str]) -> dict[str, int | str]:
    """Each relation's count in one statement (on DuckLake each statement reads the catalog's
    snapshot and stats again: one statement for all is 2-4x faster than one each); one by one
    where that statement fails, so a relation that cannot be counted still gets its line."""
    parts = [f"({COUNTED_FROM_TABLES[name]})" if name in COUNTED_FROM_TABLES else f"(SELECT count(*) FROM {_quoted(name)})"
             for name in names]
    try:
        return dict(zip(names, con.execute("SELECT " + ", ".join(parts)).fetchone())) if names else {}
    except Exception:  # noqa: BLE001 - counted one by one below, each error on its own line
        return {name: _count(con, name) for name in names}


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _count(con, name: str) -> int | str:
    try:
        if name in EMPTY_WITHOUT and not con.execute(f"SELECT count(*) FROM {_quoted(EMPTY_WITHOUT[name])}").fetchone()[0]:
            return 0
        return con.execute(COUNTED_FROM_TABLES.get(name, f"SELECT count(*) FROM {_quoted(name)}")).fetchone()[0]
    except Exception as exc:  # noqa: BLE001 - a broken view still gets listed
        return f"error: {str(exc).splitlines()[0]}"
