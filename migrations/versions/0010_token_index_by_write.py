"""Group node_token_index by write: rows per token id and write of payloads, naming its nodes, so the index holds far fewer row groups.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06

0008's index held one row per (token id, node): for a 1.3 GB root of 4,800 nodes, 80.6 M rows
in 39,365 row groups of 2,048 rows, whose statistics a lookup read one by one and whose list
every checkpoint rewrote. Now a row holds a token id, a write, and up to 1,024 of the
write's nodes that hold it (`source_ids`, `line_nos`); `node_token_index_writes` names the
sources of each write (warehouse/tokens.py). The index is built again from the payloads as
one write, in chunks of payloads and token id ranges (so memory stays bounded); the
downgrade unrolls it again.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_NODES_PER_CHUNK = 512
_ENTRIES_PER_PASS = 4_000_000
# this revision's frozen copy of warehouse.tokens' index rows (NODES_PER_ROW 1,024): from
# `{grouped}`, (token_id, nodes: its sorted list of {s: source_id, l: line_no}), as rows of
# the write {write_id} in {table}
_ROWS_OF = ('INSERT INTO "{table}" ("token_id", "write_id", "source_ids", "line_nos") '
            'SELECT "token_id", {write_id}, list_transform("chunk", k -> k.s), list_transform("chunk", k -> k.l) '
            'FROM (SELECT "token_id", "start", "nodes"["start" + 1:"start" + 1024] AS "chunk" '
            'FROM (SELECT "token_id", "nodes", unnest(range(0, len("nodes"), 1024)) AS "start" '
            'FROM ({grouped}))) ORDER BY "token_id", "start"')
# a chunk of payloads' token ids (warehouse.tokens.INDEX_ROWS)
_CHUNK = ('SELECT "token_id", list_sort(list_distinct(list({{\'s\': "source_id", \'l\': "line_no"}}))) AS "nodes" '
          'FROM (SELECT "source_id", "line_no", unnest("response_token_ids") AS "token_id" FROM "node_payloads" '
          'WHERE "source_id" BETWEEN {low} AND {high}) WHERE "token_id" IS NOT NULL GROUP BY "token_id"')
# the chunks' writes 1..{last}, a token id range at a time (warehouse.tokens.merge_writes)
_MERGED = ('SELECT "token_id", list_sort(list({{\'s\': "source_id", \'l\': "line_no"}})) AS "nodes" FROM ('
           'SELECT "token_id", unnest("source_ids") AS "source_id", unnest("line_nos") AS "line_no" '
           'FROM "node_token_index" WHERE "write_id" <= {last} AND "token_id" BETWEEN {low} AND {high}) '
           'GROUP BY "token_id"')


def upgrade() -> None:
    """0008's index is dropped first and the new one built from the payloads: reading the old
    one (a row group of statistics per 2,048 entries) held 4.3 GB at 8 copies of the 1.3 GB
    root. A write per chunk of _NODES_PER_CHUNK payloads, then merged into one."""
    bind = op.get_bind()
    budget = _cache_less(bind)
    try:
        _build(bind)
    finally:
        bind.exec_driver_sql(f"SET memory_limit = '{budget}'")


def _cache_less(bind) -> str:
    """Hold DuckDB's cache to half the memory budget for the build, which reads each payload
    once (the scans' and aggregates' own buffers come on top of memory_limit: 3.4 GB of RSS at
    8 copies of the 1.3 GB root under the 2 GB default); returns the budget as DuckDB shows it
    ('1.8 GiB'), to set back after."""
    shown = bind.exec_driver_sql("SELECT current_setting('memory_limit')").scalar()
    number, unit = shown.split()
    scale = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[unit]
    bind.exec_driver_sql(f"SET memory_limit = '{int(float(number) * scale) // 2}B'")
    return shown


def _build(bind) -> None:
    op.drop_table('node_token_index')
    for leftover in ('node_token_index_writes', _MERGING):  # an upgrade killed midway: built anew
        if sa.inspect(bind).has_table(leftover):
            op.drop_table(leftover)
    op.create_table('node_token_index_writes',
    sa.Column('write_id', sa.Integer(), nullable=False),
    sa.Column('source_id', sa.Integer(), nullable=False),
    )
    _create_index_table('node_token_index')
    chunks = bind.exec_driver_sql(
        'SELECT min("source_id"), max("source_id") FROM (SELECT "source_id", '
        f'sum(count(*)) OVER (ORDER BY "source_id") // {_NODES_PER_CHUNK} AS "chunk" '
        'FROM "node_payloads" GROUP BY "source_id") GROUP BY "chunk" ORDER BY 1').fetchall()
    for write_id, (low, high) in enumerate(chunks, start=1):
        op.execute(_ROWS_OF.format(table='node_token_index', write_id=write_id,
                                   grouped=_CHUNK.format(low=low, high=high)))
        op.execute(f'INSERT INTO "node_token_index_writes" ("write_id", "source_id") SELECT DISTINCT {write_id}, '
                   f'"source_id" FROM "node_payloads" WHERE "source_id" BETWEEN {low} AND {high}')
        _commit(bind)
    if len(chunks) < 2:
        return
    # the merged write goes into a table of its own, which then replaces the chunks' table: one
    # DELETE of every chunk row held 4 GB at 8 copies of the 1.3 GB root (and ran a 1 GB budget
    # out), and left them in the file as deleted rows
    _create_index_table(_MERGING)
    _commit(bind)
    merged = len(chunks) + 1
    low, high, entries = bind.exec_driver_sql(
        'SELECT min("token_id"), max("token_id"), sum(len("source_ids")) FROM "node_token_index"').fetchone()
    for start, end in _ranges(low, high, int(entries or 0)):
        op.execute(_ROWS_OF.format(table=_MERGING, write_id=merged,
                                   grouped=_MERGED.format(last=merged - 1, low=start, high=end)))
        _commit(bind)
    op.execute(f'UPDATE "node_token_index_writes" SET "write_id" = {merged}')
    op.drop_table('node_token_index')
    op.rename_table(_MERGING, 'node_token_index')


_MERGING = 'node_token_index_merging'


def _create_index_table(name: str) -> None:
    op.create_table(name,
    sa.Column('token_id', sa.Integer(), nullable=False),
    sa.Column('write_id', sa.Integer(), nullable=False, comment='node_token_index_writes.write_id'),
    sa.Column('source_ids', sa.ARRAY(sa.Integer()), nullable=False,
              comment='the nodes holding the token in this write: source_ids[i], line_nos[i]'),
    sa.Column('line_nos', sa.ARRAY(sa.Integer()), nullable=False, comment='read in step with source_ids'),
    )


def _commit(bind) -> None:
    """Commit what is built so far (DuckDB's transaction; Alembic's goes on in the next): one
    transaction of the whole build held 4.0 GB at 8 copies of the 1.3 GB root, growing with
    the warehouse. A build killed midway leaves the revision at 0009 and a part-built index,
    which the next upgrade drops and builds again from the payloads."""
    bind.exec_driver_sql("COMMIT")
    bind.exec_driver_sql("BEGIN TRANSACTION")


def _ranges(low, high, entries: int) -> list[tuple[int, int]]:
    """Consecutive token id ranges covering [low, high], about _ENTRIES_PER_PASS entries each
    if the ids are spread evenly."""
    if not entries:
        return []
    passes = max(1, -(-entries // _ENTRIES_PER_PASS))
    width = -(-(high - low + 1) // passes)
    return [(start, min(start + width - 1, high)) for start in range(low, high + 1, width)]


def downgrade() -> None:
    op.create_table('node_token_index_unrolled',
    sa.Column('token_id', sa.Integer(), nullable=False),
    sa.Column('source_id', sa.Integer(), nullable=False, comment="the node's"),
    sa.Column('line_no', sa.Integer(), nullable=False, comment="the node's"),
    )
    op.execute('INSERT INTO "node_token_index_unrolled" ("token_id", "source_id", "line_no") '
               'SELECT "token_id", "source_id", "line_no" FROM (SELECT "token_id", "write_id", '
               'unnest("source_ids") AS "source_id", unnest("line_nos") AS "line_no" FROM "node_token_index") '
               'JOIN "node_token_index_writes" USING ("write_id", "source_id") '
               'ORDER BY "token_id", "source_id", "line_no"')
    op.drop_table('node_token_index')
    op.drop_table('node_token_index_writes')
    op.rename_table('node_token_index_unrolled', 'node_token_index')
