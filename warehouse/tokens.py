"""Finding a token id across all runs without unrolling every token array.

`node_token_index` holds, for each write of payloads (an ingest's batch of files, a trainer's
round, a restore's chunk) and each distinct response token id in it, one row: the token id,
the write, and the nodes of that write whose response holds it (`source_ids` and `line_nos`,
two lists read in step). A write's rows are sorted by token id, so DuckDB's per-row-group
min and max (zone maps) skip every row group of a write but the one that can hold an id.
One row per token and write, rather than one per token and node, keeps the row groups few:
with DuckDB's 2,048-row groups an index of one row per (token, node) held 39,365 row groups
for a 1.3 GB root, and a lookup checked the statistics of every one of them, and every
checkpoint rewrote their list; grouped by write it holds about 25 times fewer.

`node_token_index_writes` says which sources each write covered. It is owned by the source:
a reloaded (changed) source loses its row there, so the entries the index still holds for
it in the old write are not read (the new payloads are in a new write), and a write whose
sources are all gone loses its index rows at once. Write ids are never reused while rows
of them are held.

A search reads the index first, then unrolls only the payloads of the nodes found, through
`node_tokens`' own SELECT, so its rows are the view's rows for that id
(tests/warehouse/test_token_search.py compares them). Reading a node's arrays reads its
whole row group's (2,048 payloads), one row group a statement: an id held by nodes in every
row group costs the view's time (0.5 s a row group of ~18 K-token payloads) and one row
group's memory. `search_token_nodes` answers from the index and `nodes` alone, one row per
node holding the id and no token array read: the across-all-runs question, at the cost of
an index lookup (positions and logprobs are then read for the nodes or run asked about).
"""
from __future__ import annotations

from warehouse.db import ROW_GROUP_SIZE

INDEX = "node_token_index"
WRITES = "node_token_index_writes"

#: A row holds at most this many nodes; a token held by more takes consecutive rows. A
#: lookup reads the whole row group (2,048 rows) of the row it needs: rows of bounded length
#: bound what it reads, and rows of a few hundred nodes keep the row groups few.
NODES_PER_ROW = 1024

#: Index rows from `{grouped}`, a relation of ("token_id", "nodes": the sorted list of the
#: token's {'s': source_id, 'l': line_no}), as rows of the write `$write`, in token id order.
_ROWS_OF = ('SELECT "token_id", CAST($write AS INTEGER) AS "write_id", '
            'list_transform("chunk", k -> k.s) AS "source_ids", list_transform("chunk", k -> k.l) AS "line_nos" '
            'FROM (SELECT "token_id", "start", "nodes"["start" + 1:"start" + ' + str(NODES_PER_ROW) + '] AS "chunk" '
            'FROM (SELECT "token_id", "nodes", unnest(range(0, len("nodes"), ' + str(NODES_PER_ROW) + ')) AS "start" '
            'FROM ({grouped}))) ORDER BY "token_id", "start"')

#: The index rows of one write over the payload rows a relation holds (its columns
#: `source_id`, `line_no` and the token array named by `{ids}`): per distinct token id, its
#: nodes in (source_id, line_no) order. Each token's nodes are sorted after the aggregate: an
#: ORDER BY inside list() keeps a sort buffer per token id, and 151 K of them ran a 64 MB
#: batch out of 1.8 GB.
INDEX_ROWS = _ROWS_OF.replace("{grouped}", (
    'SELECT "token_id", list_sort(list_distinct(list({{\'s\': "source_id", \'l\': "line_no"}}))) AS "nodes" '
    'FROM (SELECT {source_id} AS "source_id", {line_no} AS "line_no", unnest({ids}) AS "token_id" '
    'FROM {relation}) WHERE "token_id" IS NOT NULL GROUP BY "token_id"'))
INSERT_INDEX = f'INSERT INTO "{INDEX}" ("token_id", "write_id", "source_ids", "line_nos") '

#: The live (source_id, line_no) of the nodes whose response holds the token id `$1`: the
#: index's entries of the write that holds each source now.
HOLDERS = (f'SELECT h."source_id", h."line_no" FROM (SELECT "write_id", unnest("source_ids") AS "source_id", '
           f'unnest("line_nos") AS "line_no" FROM "{INDEX}" WHERE "token_id" = $1) AS h '
           f'JOIN "{WRITES}" AS w USING ("write_id", "source_id")')

#: Nodes whose payloads one DuckLake statement unrolls: its join holds their arrays, and
#: 3,032 nodes of ~18 K tokens ran out of a 2 GB budget in one statement.
NODES_PER_STATEMENT = 256
#: Payload row ids a row group of node_payloads holds: a search on the file reads one row
#: group's arrays a statement.
ROWS_PER_GROUP = ROW_GROUP_SIZE
#: The live (source_id, line_no) of the nodes (of run $2, or of every run) whose response
#: holds the token id `$1`.
HOLDERS_OF_RUN = (f'SELECT h."source_id", h."line_no" FROM ({HOLDERS}) AS h WHERE $2 IS NULL OR '
                  '(h."source_id", h."line_no") IN (SELECT "source_id", "line_no" FROM "nodes" WHERE "run_id" = $2)')
#: The payload row groups (row id // {rows}) holding the nodes of HOLDERS_OF_RUN, with those
#: nodes' (source_id, line_no); only the payloads' keys are read.
ROW_GROUPS_HOLDING = ('SELECT p.rowid // {rows} AS "row_group", list(("source_id", "line_no") ORDER BY "source_id", '
                      f'"line_no") FROM "node_payloads" AS p SEMI JOIN ({HOLDERS_OF_RUN}) AS h USING ("source_id", '
                      '"line_no") GROUP BY 1 ORDER BY 1')
#: Payloads one write of a rebuild indexes (a restore, `rebuild_index`): its DISTINCT holds
#: their token ids, about 18 K each in the scale benchmark's worst case.
NODES_PER_REBUILT_WRITE = 512
#: One pass of `merge_writes`: the live entries of the writes $first to $last whose token id is
#: in [$low, $high], as rows of the write {write_id}.
_MERGED_ROWS = INSERT_INDEX + _ROWS_OF.replace("{grouped}", (
    'SELECT "token_id", list_sort(list({{\'s\': "source_id", \'l\': "line_no"}})) AS "nodes" FROM ('
    'SELECT "write_id", "token_id", unnest("source_ids") AS "source_id", unnest("line_nos") AS "line_no" '
    f'FROM "{INDEX}" WHERE "write_id" BETWEEN $first AND $last AND "token_id" BETWEEN $low AND $high) '
    f'JOIN "{WRITES}" USING ("write_id", "source_id") GROUP BY "token_id"')).replace("$write", "{write_id}")
#: Index entries one pass of `merge_writes` groups (its memory: about 100 bytes an entry).
ENTRIES_PER_MERGE = 8_000_000
_PAYLOADS = 'FROM "node_payloads" AS p'
ORDER_COLUMNS = ("run_id", "round", "task", "node_id", "source_id", "line_no", "position")
_ORDER = " ORDER BY " + ", ".join(f'"{c}"' for c in ORDER_COLUMNS)


def write_index(con, relation: str, source_ids: list[int], params: list | tuple = (), *,
                source_id: str = '"source_id"', line_no: str = '"line_no"', ids: str = '"response_token_ids"') -> None:
    """Index the payload rows `relation` yields (of the sources `source_ids`) as one new write.

    `relation` is what follows FROM, with its own `?` parameters `params`; the other arguments
    name its source id, line number and response token id expressions."""
    if not source_ids:
        return
    write_id = next_write(con)
    rows = INDEX_ROWS.format(source_id=source_id, line_no=line_no, ids=ids, relation=relation)
    con.execute(INSERT_INDEX + rows.replace("$write", str(int(write_id))), list(params))
    con.execute(f'INSERT INTO "{WRITES}" ("write_id", "source_id") SELECT {int(write_id)}, unnest(?)',
                [sorted(set(source_ids))])


def next_write(con) -> int:
    """The id the next write of the index takes."""
    return con.execute(f'SELECT coalesce(max("write_id"), 0) + 1 FROM "{WRITES}"').fetchone()[0]


def merge_writes(con, first: int) -> None:
    """The writes from `first` on (one command's: an ingest's batches, a restore's chunks)
    as one write: a row per token id over all their live entries, in place of a row per token
    id and batch. Same entries, far fewer rows: for the scale benchmark's 1.3 GB root, 151 K
    rows instead of 21 batches of 151 K. In token id ranges of about ENTRIES_PER_MERGE entries
    each, so memory stays bounded whatever the writes hold. The caller's transaction."""
    writes = [w for (w,) in con.execute(f'SELECT DISTINCT "write_id" FROM "{WRITES}" WHERE "write_id" >= ? '
                                        'ORDER BY 1', [first]).fetchall()]
    if len(writes) < 2:
        return
    merged = writes[-1] + 1
    low, high, entries = con.execute(f'SELECT min("token_id"), max("token_id"), sum(len("source_ids")) '
                                     f'FROM "{INDEX}" WHERE "write_id" >= ?', [first]).fetchone()
    passes = max(1, -(-int(entries or 0) // ENTRIES_PER_MERGE))
    width = -(-(high - low + 1) // passes) if entries else 0
    for start in range(low, high + 1, width) if entries else ():
        con.execute(_MERGED_ROWS.format(write_id=int(merged)), {"first": first, "last": merged - 1, "low": start, "high": start + width - 1})
    con.execute(f'UPDATE "{WRITES}" SET "write_id" = ? WHERE "write_id" >= ? AND "write_id" < ?',
                [merged, first, merged])
    con.execute(f'DELETE FROM "{INDEX}" WHERE "write_id" >= ? AND "write_id" < ?', [first, merged])


def forget_sources(con, source_ids: list[int]) -> None:
    """The index no longer reads `source_ids`' entries (their payloads are being replaced or
    removed); a write left without sources loses its rows."""
    if not source_ids:
        return
    writes = [w for (w,) in con.execute(f'SELECT DISTINCT "write_id" FROM "{WRITES}" WHERE "source_id" = ANY(?)',
                                        [source_ids]).fetchall()]
    con.execute(f'DELETE FROM "{WRITES}" WHERE "source_id" = ANY(?)', [source_ids])
    if writes:
        con.execute(f'DELETE FROM "{INDEX}" WHERE "write_id" = ANY(?) AND "write_id" NOT IN '
                    f'(SELECT "write_id" FROM "{WRITES}" WHERE "write_id" = ANY(?))', [writes, writes])


def rebuild_index(con) -> None:
    """The index of every payload row, in place of whatever it held (a restore): written
    NODES_PER_REBUILT_WRITE payloads at a time, in (source_id, line_no) order, then merged
    into one write, so its memory is bounded whatever the warehouse holds."""
    con.execute(f'DELETE FROM "{INDEX}"')
    con.execute(f'DELETE FROM "{WRITES}"')
    first = next_write(con)
    bounds = con.execute(
        'SELECT min("source_id"), max("source_id") FROM (SELECT "source_id", '
        f'sum(count(*)) OVER (ORDER BY "source_id") // {NODES_PER_REBUILT_WRITE} AS "chunk" '
        'FROM "node_payloads" GROUP BY "source_id") GROUP BY "chunk" ORDER BY 1').fetchall()
    for low, high in bounds:
        sources = [s for (s,) in con.execute('SELECT DISTINCT "source_id" FROM "node_payloads" '
                                            'WHERE "source_id" BETWEEN ? AND ?', [low, high]).fetchall()]
        write_index(con, '"node_payloads" WHERE "source_id" BETWEEN ? AND ?', sources, [low, high])
    merge_writes(con, first)


def search_token(url: str, token_id: int, run_id: str | None = None, progress=None):
    """Every occurrence of `token_id` in a node's response (of `run_id`, or of every run), as
    `node_tokens` rows in (run, round, task, node, position) order: a `warehouse.query.Result`.
    `progress(done, total)`: called after each statement (see `find_token`)."""
    from warehouse.db import connect
    from warehouse.revision import require_head

    with connect(url, read_only=True) as con:
        require_head(con, url)
        return find_token(con, token_id, run_id, progress)


#: the nodes holding a token id, from the index and the lean nodes table (no token array)
NODES_HOLDING = (f'SELECT n."run_id", n."round", n."task", n."node_id", n."source_id", n."line_no", '
                 f'n."n_response_tokens" FROM ({HOLDERS}) AS i JOIN "nodes" AS n USING ("source_id", "line_no") '
                 'WHERE ($2 IS NULL OR n."run_id" = $2) '
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


def find_token(con, token_id: int, run_id: str | None = None, progress=None):
    """`search_token` on an open connection: a `warehouse.query.Result`.

    The index names the nodes (of `run_id`, or of every run) whose payloads hold the id;
    `node_tokens`' own SELECT (sql/) then reads only those payloads: on the file a statement
    per payload row group that holds one, on DuckLake per NODES_PER_STATEMENT nodes. Each
    statement's range of row ids and of source ids is what DuckDB checks against a row group
    before reading its arrays, so a statement holds one row group's arrays at most, whatever
    the warehouse holds: an id held in every row group costs a read of every payload (the
    view's cost), never its memory. `progress(done, total)` is called after each statement.
    The rows are sorted as the view's query sorts them."""
    from warehouse.db import is_ducklake_connection, scan_share
    from warehouse.query import Result

    if is_ducklake_connection(con):
        keys = con.execute(f'SELECT DISTINCT "source_id", "line_no" FROM ({HOLDERS_OF_RUN}) ORDER BY ALL',
                           [token_id, run_id]).fetchall()
        batches = [(keys[i:i + NODES_PER_STATEMENT], None) for i in range(0, len(keys), NODES_PER_STATEMENT)]
    else:
        groups = con.execute(ROW_GROUPS_HOLDING.format(rows=int(ROWS_PER_GROUP)), [token_id, run_id]).fetchall()
        batches = [([tuple(k) for k in held], (g * ROWS_PER_GROUP, (g + 1) * ROWS_PER_GROUP - 1)) for g, held in groups]
    where = ' WHERE "token_id" = $1 AND ($2 IS NULL OR "run_id" = $2)'
    if not batches:  # no node holds it: the view's columns, no row read
        cur = con.execute('SELECT * FROM "node_tokens"' + where + " LIMIT 0", [token_id, run_id])
        return Result([d[0] for d in cur.description], [], [str(d[1]) for d in cur.description])
    rows = []
    with scan_share(con):  # each row group is read once (at 30x: 3.2 GB of RSS, 2.2 GB with it, as fast)
        for done, (batch, row_ids) in enumerate(batches, 1):
            cur = con.execute(f"SELECT * FROM ({narrowed_view(batch, row_ids)}) AS t" + where, [token_id, run_id])
            columns, types = [d[0] for d in cur.description], [str(d[1]) for d in cur.description]
            rows += cur.fetchall()
            if progress is not None:
                progress(done, len(batches))
    order = [columns.index(c) for c in ORDER_COLUMNS]  # none of them NULL; VARCHAR in byte order, as DuckDB's
    rows.sort(key=lambda row: [row[i] for i in order])
    return Result(columns, rows, types)


def narrowed_view(keys: list[tuple[int, int]], row_ids: tuple[int, int] | None = None) -> str:
    """`node_tokens`' SELECT over the payloads of the nodes `keys` (source_id, line_no) only,
    those of the payload row ids `row_ids` (first, last) where given."""
    from sql import view_body

    body = view_body("node_tokens")
    if body.count(_PAYLOADS) != 1:
        raise AssertionError(f"sql/node_tokens.sql reads node_payloads other than as {_PAYLOADS!r}")
    sources = sorted({int(s) for s, _ in keys})
    pairs = ", ".join(f"({int(s)}, {int(n)})" for s, n in keys)
    # the ranges are what DuckDB checks against each row group's bounds (an IN list alone is
    # not: one statement of 256 nodes read every row group of a 10x warehouse, 37 s against 4.5 s)
    ranges = f'"source_id" BETWEEN {sources[0]} AND {sources[-1]}'
    if row_ids:
        ranges += f" AND rowid BETWEEN {int(row_ids[0])} AND {int(row_ids[1])}"
    return body.replace(_PAYLOADS, f'FROM (SELECT * FROM "node_payloads" WHERE {ranges} AND "source_id" IN '
                                   f'({", ".join(map(str, sources))}) AND ("source_id", "line_no") IN ({pairs})) AS p')
