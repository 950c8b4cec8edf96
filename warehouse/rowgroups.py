"""Writes that leave the row groups already in the file as they are.

A DuckDB transaction that appends fewer rows to a table than a row group holds appends them
into the table's last row group, and the checkpoint after rewrites that row group whole:
every column of every row it holds, the rows committed before included (full or not: the
append starts there). One that appends at least a row group's worth writes its rows as row
groups of their own, and the last row group stays as it is. node_payloads and
node_train_tokens hold a node's token arrays in a row (about 220 KB for an 18 K-token
response), so a 2-node run after a row group of 1,856 payloads rewrote 400 MB (2.7-3.3 s a
`warehouse ingest` process on this project's 2-core machines), whatever the run added.

So a transaction that appends to one of PADDED_TABLES appends a multiple of ROW_GROUP_SIZE
rows: before its COMMIT, `pad` adds *pad rows* (line numbers -1, -2, ..., which no record
has, under the lowest source id the transaction appended, every other column NULL or empty)
up to the next multiple, and after it `drop_pads`
deletes them in a transaction of its own (rows a transaction appends and deletes itself are
never written). A deleted row keeps its place: DuckDB merges row groups with
deleted rows only in tables without an index, and both tables have a primary key. A
checkpoint then writes what was added and the deletes, never a row group written before.
`warehouse.db.transaction` pads on the file (a trainer's round, a restore, `migrate-to`), and
so does each ingest batch; a DuckLake commit writes files of its own and is not padded.

Between the commit and the deletion (milliseconds) the pad rows are visible. A command killed
in between leaves them: the next padded write into that table deletes them in its own
transaction. Until then they are rows no node claims (`leftover_pads` counts them), which no
view reads: every reader of the arrays joins `nodes`.
"""
from __future__ import annotations

# Row groups of 2,048 rows (DuckDB's smallest; its default is 122,880). With the default,
# node_payloads (a few thousand rows of large token arrays) was one row group that every
# checkpoint rewrote, so adding a run cost what the warehouse already held; with 2,048 a
# write that joins the last row group rewrites at most 2,047 rows before its own, and a
# padded write (`pad` below) joins none. DuckDB does not store the size in the file: every
# connection that writes attaches the file with it, and migration 0006 regroups older warehouses.
ROW_GROUP_SIZE = 2048

#: The tables of a row of token arrays per node, whose row groups a write must not rejoin,
#: with what a pad row puts in their NOT NULL columns besides the key.
PADDED_TABLES = {"node_payloads": {}, "node_train_tokens": {"run_id": "''"}}
#: What tells a pad row: its line number is negative (records' lines count up from 1). Its
#: source id is one the transaction appended, so a row group's source id range (DuckDB's zone
#: map, which a point read by (source_id, line_no) skips row groups by) stays its records' own:
#: pads under source id -1 widened every padded row group's range down to -1, and a read of an
#: early source (0.02 s for a late one) scanned the keys of every one of them (0.19-0.30 s on
#: a file of 448 row groups).
PADS = '"line_no" < 0'

# Rows each table holds in the file, deleted ones included (`estimated_size`); the rows the
# open transaction appended have row ids past those (DuckDB numbers them from 2^55).
_HELD = ("SELECT table_name, estimated_size FROM duckdb_tables() WHERE database_name = current_database() "
         "AND schema_name = 'main' AND table_name IN ({names}) ORDER BY table_name")


def pad(con) -> bool:
    """Inside a transaction, before its COMMIT: pad what it appended to each of PADDED_TABLES
    up to a multiple of ROW_GROUP_SIZE rows, deleting first the pads an interrupted command
    left there. Returns whether pads were added (then `drop_pads` after the COMMIT). Two
    small statements when nothing was appended."""
    if not PADDED_TABLES:
        return False
    held = dict(con.execute(_HELD.format(names=", ".join(f"'{n}'" for n in PADDED_TABLES))).fetchall())
    if not held:  # a schema before these tables
        return False
    names = sorted(held)
    appended_rows = ", ".join(f'(SELECT [count(*), min("source_id")] FROM "{n}" WHERE rowid >= {int(held[n])})'
                              for n in names)
    added = False
    for name, (appended, source_id) in zip(names, con.execute(f"SELECT {appended_rows}").fetchone()):
        fill = -appended % ROW_GROUP_SIZE
        if not fill:  # nothing appended, or whole row groups already
            continue
        con.execute(f'DELETE FROM "{name}" WHERE {PADS}')  # an interrupted command's
        required = PADDED_TABLES[name]
        columns = "".join(f', "{c}"' for c in required)
        values = "".join(f", {v}" for v in required.values())
        con.execute(f'INSERT INTO "{name}" ("source_id", "line_no"{columns}) SELECT {int(source_id)}, '
                    f'-1 - CAST(i AS INTEGER){values} FROM range({fill}) AS r(i)')  # line numbers -1, -2, ...
        added = True
    return added


def drop_pads(con) -> None:
    """After the COMMIT of a padded transaction: delete its pads, in a transaction of its own."""
    con.execute("BEGIN TRANSACTION")
    try:
        for name in PADDED_TABLES:
            con.execute(f'DELETE FROM "{name}" WHERE {PADS}')
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def leftover_pads(con) -> dict[str, int]:
    """Pad rows still visible (a command killed between its commit and their deletion), by table."""
    counts = {}
    for name in PADDED_TABLES:
        (n,) = con.execute(f'SELECT count(*) FROM "{name}" WHERE {PADS}').fetchone()
        if n:
            counts[name] = n
    return counts
