"""Writes that leave the row groups already in the file as they are.

DuckDB appends a commit's rows into a table's last row group, and the next checkpoint
rewrites that row group whole: every column of every row it holds, the rows committed before
included. node_payloads and node_train_tokens hold a node's token arrays in a row (about
220 KB for an 18 K-token response), so a 2-node run that joined a row group of 1,856 payloads
rewrote 400 MB (2.0-3.3 s on this project's 2-core machines), whatever the run added.

So a transaction that appends to one of PADDED_TABLES ends at a row group boundary: before
its COMMIT, `pad` appends *pad rows* (source id PAD_SOURCE_ID, a line number of their own,
every other column NULL or empty) up to the next multiple of ROW_GROUP_SIZE, and after it `drop_pads`
deletes them in a transaction of their own. A deleted row keeps its place (DuckDB merges row
groups with deleted rows only in tables without an index, and both tables have a primary
key), so the next write starts a row group of its own, and a checkpoint writes what was added
and the deletes, never the rows before. `warehouse.db.transaction` does both on the file;
`ingest`'s own transactions call them. A DuckLake commit writes files of its own: nothing to
pad there.

Between the commit and the deletion (milliseconds) the pad rows are visible. A command killed
in between leaves them: the next padded write into that table deletes them in its own
transaction. Until then they are rows no node claims (`leftover_pads` counts them), which no
view reads: every reader of the arrays joins `nodes`.
"""
from __future__ import annotations

# Row groups of 2,048 rows (DuckDB's smallest; its default is 122,880). A commit appends into
# the table's last row group, and the next checkpoint rewrites that row group whole: with the
# default, node_payloads (a few thousand rows of large token arrays) is one row group that
# every checkpoint rewrote, so adding a run cost what the warehouse already held. With 2,048
# rows a checkpoint rewrites at most one partial row group, whatever the warehouse holds
# (benchmarks/scale_bench.py), and a padded write (`pad` below) ends at a row group
# boundary, so the next write joins none. DuckDB does not store the size in the file: every
# connection that writes attaches the file with it, and migration 0006 regroups older warehouses.
ROW_GROUP_SIZE = 2048

#: The tables of a row of token arrays per node, whose row groups a write must not rejoin,
#: with what a pad row puts in their NOT NULL columns besides the key.
PADDED_TABLES = {"node_payloads": {}, "node_train_tokens": {"run_id": "''"}}
#: The source id of every pad row: no source has it (source ids count up from 1).
PAD_SOURCE_ID = -1

# Rows each table holds in the file, deleted ones included (`estimated_size`); the rows the
# open transaction appended have row ids past those (DuckDB numbers them from 2^55).
_HELD = ("SELECT table_name, estimated_size FROM duckdb_tables() WHERE database_name = {catalog} "
         "AND schema_name = 'main' AND table_name IN ({names}) ORDER BY table_name")


def _table(name: str, catalog: str | None) -> str:
    return f'"{catalog}".main."{name}"' if catalog else f'"{name}"'


def pad(con, catalog: str | None = None, *, held_rows: bool = False) -> bool:
    """Inside a transaction, before its COMMIT: pad each of PADDED_TABLES this transaction
    appended to (or, `held_rows`, each whose rows end inside a row group) up to a row group
    boundary; delete the pads an interrupted command left. Returns whether pads were added
    (then `drop_pads` after the COMMIT). Two small statements when nothing was appended."""
    if not PADDED_TABLES:
        return False
    where = "'" + catalog.replace("'", "''") + "'" if catalog else "current_database()"
    held = dict(con.execute(_HELD.format(catalog=where, names=", ".join(f"'{n}'" for n in PADDED_TABLES))).fetchall())
    if not held:  # a schema before these tables
        return False
    names = sorted(held)
    counts = ", ".join(f"(SELECT count(*) FROM {_table(n, catalog)} WHERE rowid >= {int(held[n])})" for n in names)
    appended = dict(zip(names, con.execute(f"SELECT {counts}").fetchone()))
    added = False
    for name in names:
        if not (appended[name] or held_rows):
            continue
        table = _table(name, catalog)
        con.execute(f'DELETE FROM {table} WHERE "source_id" = {PAD_SOURCE_ID}')  # left by an interrupted command
        end = held[name] + appended[name]
        fill = -end % ROW_GROUP_SIZE
        if fill:
            # line numbers: minus the row's position in the table, so no two pads share a key
            required = PADDED_TABLES[name]
            columns = "".join(f', "{c}"' for c in required)
            values = "".join(f", {v}" for v in required.values())
            con.execute(f'INSERT INTO {table} ("source_id", "line_no"{columns}) SELECT {PAD_SOURCE_ID}, '
                        f'-(CAST({end} AS BIGINT) + i + 1){values} FROM range({fill}) AS r(i)')
            added = True
    return added


def drop_pads(con, catalog: str | None = None) -> None:
    """After the COMMIT of a padded transaction: delete its pads, in a transaction of its own
    (a transaction's own appended rows that it deletes are never written)."""
    con.execute("BEGIN TRANSACTION")
    try:
        for name in PADDED_TABLES:
            con.execute(f'DELETE FROM {_table(name, catalog)} WHERE "source_id" = {PAD_SOURCE_ID}')
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def leftover_pads(con) -> dict[str, int]:
    """Pad rows still visible (a command killed between its commit and their deletion), by table."""
    counts = {}
    for name in PADDED_TABLES:
        (n,) = con.execute(f'SELECT count(*) FROM "{name}" WHERE "source_id" = {PAD_SOURCE_ID}').fetchone()
        if n:
            counts[name] = n
    return counts
