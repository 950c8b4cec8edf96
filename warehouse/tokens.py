"""Finding a token id across all runs without unrolling every token array.

`node_token_index` holds one row per distinct response token id of each payload, written
with the payload and sorted by token id within each write (ingest, a trainer's round, a
restore). A search reads the index first: DuckDB keeps each row group's min and max token id
and skips the row groups that cannot hold the id, so it reads a few row groups per write;
then it unrolls only the payloads of the nodes found, through `node_tokens`' own SELECT, so
its rows are the view's rows for that id (tests/warehouse/test_token_search.py compares them).
Reading a node's arrays reads its whole row group's (2,048 payloads): an id held by nodes
in every row group costs about what the view costs. `search_token_nodes` answers from the
index and `nodes` alone, one row per node holding the id and no token array read: the
across-all-runs question, at the cost of an index lookup (positions and logprobs are then
read for the nodes or run asked about).
"""
from __future__ import annotations

INDEX = "node_token_index"

#: The index rows of the payload rows a relation holds (its columns `source_id`, `line_no` and
#: the token array named by `{ids}`), sorted so that each row group spans few token ids.
INDEX_ROWS = ('SELECT DISTINCT "token_id", "source_id", "line_no" FROM ('
              'SELECT {source_id} AS "source_id", {line_no} AS "line_no", unnest({ids}) AS "token_id" '
              'FROM {relation}) WHERE "token_id" IS NOT NULL '
              'ORDER BY "token_id", "source_id", "line_no"')
INSERT_INDEX = f'INSERT INTO "{INDEX}" ("token_id", "source_id", "line_no") '

#: Above this many nodes holding the id, the search reads `node_tokens` whole: the payloads it
#: must unroll are then most of the warehouse, and the list of nodes would be a long statement.
MAX_NARROWED_NODES = 5_000
#: Nodes whose payloads one narrowed statement unrolls: its join holds their arrays, and
#: 3,032 nodes of ~18 K tokens ran out of a 2 GB budget in one statement.
NODES_PER_STATEMENT = 256
_PAYLOADS = 'FROM "node_payloads" AS p'
ORDER_COLUMNS = ("run_id", "round", "task", "node_id", "source_id", "line_no", "position")
_ORDER = " ORDER BY " + ", ".join(f'"{c}"' for c in ORDER_COLUMNS)


def rebuild_index(con) -> None:
    """The index of every payload row, in place of whatever it held (a restore, a migration)."""
    con.execute(f'DELETE FROM "{INDEX}"')
    con.execute(INSERT_INDEX + INDEX_ROWS.format(source_id='"source_id"', line_no='"line_no"',
                                                 ids='"response_token_ids"', relation='"node_payloads"'))


def search_token(url: str, token_id: int, run_id: str | None = None):
    """Every occurrence of `token_id` in a node's response (of `run_id`, or of every run), as
    `node_tokens` rows in (run, round, task, node, position) order: a `warehouse.query.Result`."""
    from warehouse.db import connect
    from warehouse.revision import require_head

    with connect(url, read_only=True) as con:
        require_head(con, url)
        return find_token(con, token_id, run_id)


#: the nodes holding a token id, from the index and the lean nodes table (no token array)
NODES_HOLDING = (f'SELECT n."run_id", n."round", n."task", n."node_id", n."source_id", n."line_no", '
                 f'n."n_response_tokens" FROM "{INDEX}" AS i JOIN "nodes" AS n USING ("source_id", "line_no") '
                 'WHERE i."token_id" = $1 AND ($2 IS NULL OR n."run_id" = $2) '
                 'ORDER BY n."run_id", n."round", n."task", n."node_id", n."source_id", n."line_no"')


def search_token_nodes(url: str, token_id: int, run_id: str | None = None):
    """The nodes (of `run_id`, or of every run) whose response holds `token_id`, one row each
    in (run, round, task, node) order, read from the token index without reading any token
    array: a `warehouse.query.Result`. The same nodes as `search_token`'s rows name."""
    from warehouse.db import connect
    from warehouse.query import Result
    from warehouse.revision import require_head

    with connect(url, read_only=True) as con:
        require_head(con, url)
        cur = con.execute(NODES_HOLDING, [token_id, run_id])
        return Result([d[0] for d in cur.description], cur.fetchall(), [str(d[1]) for d in cur.description])


def find_token(con, token_id: int, run_id: str | None = None):
    """`search_token` on an open connection: a `warehouse.query.Result`.

    The index names the nodes whose payloads hold the id; `node_tokens`' own SELECT (sql/) then
    reads only those payloads: their source ids as a constant list, which DuckDB checks against
    each row group's min and max before reading its arrays. At most NODES_PER_STATEMENT nodes'
    payloads a statement (the join holds their arrays), the rows sorted as the view's query
    sorts them."""
    from warehouse.query import Result

    keys = con.execute(f'SELECT DISTINCT "source_id", "line_no" FROM "{INDEX}" WHERE "token_id" = ? '
                       'ORDER BY ALL', [token_id]).fetchall()
    where = ' WHERE "token_id" = $1 AND ($2 IS NULL OR "run_id" = $2)'
    if not keys or len(keys) > MAX_NARROWED_NODES:
        cur = con.execute('SELECT * FROM "node_tokens"' + where + _ORDER, [token_id, run_id])
        return Result([d[0] for d in cur.description], cur.fetchall(), [str(d[1]) for d in cur.description])
    rows = []
    for first in range(0, len(keys), NODES_PER_STATEMENT):
        cur = con.execute(f"SELECT * FROM ({narrowed_view(keys[first:first + NODES_PER_STATEMENT])}) AS t" + where,
                          [token_id, run_id])
        rows += cur.fetchall()
    columns = [d[0] for d in cur.description]
    order = [columns.index(c) for c in ORDER_COLUMNS]  # none of them NULL; VARCHAR in byte order, as DuckDB's
    rows.sort(key=lambda row: [row[i] for i in order])
    return Result(columns, rows, [str(d[1]) for d in cur.description])


def narrowed_view(keys: list[tuple[int, int]]) -> str:
    """`node_tokens`' SELECT over the payloads of the nodes `keys` (source_id, line_no) only."""
    from sql import view_body

    body = view_body("node_tokens")
    if body.count(_PAYLOADS) != 1:
        raise AssertionError(f"sql/node_tokens.sql reads node_payloads other than as {_PAYLOADS!r}")
    sources = ", ".join(str(int(s)) for s in sorted({s for s, _ in keys}))
    pairs = ", ".join(f"({int(s)}, {int(n)})" for s, n in keys)
    return body.replace(_PAYLOADS, f'FROM (SELECT * FROM "node_payloads" WHERE "source_id" IN ({sources}) '
                                   f'AND ("source_id", "line_no") IN ({pairs})) AS p')
