"""Group node_token_index by write: one row per token id and write of payloads, naming its nodes, so the index holds far fewer row groups.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06

0008's index held one row per (token id, node): for a 1.3 GB root of 4,800 nodes, 80.6 M rows
in 39,365 row groups of 2,048 rows, whose statistics a lookup read one by one and whose list
every checkpoint rewrote. Now a row holds a token id, a write, and the write's nodes that
hold it (`source_ids`, `line_nos`); `node_token_index_writes` names the sources of each write
(warehouse/tokens.py). The entries held are regrouped, chunk after chunk of sources (at most
_ENTRIES_PER_WRITE entries each, so memory stays bounded), each chunk one write; the downgrade
unrolls them again.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_ENTRIES_PER_WRITE = 4_000_000
# this revision's frozen copy of warehouse.tokens.INDEX_ROWS over 0008's index rows
_FILL = ('INSERT INTO "node_token_index_regrouped" ("token_id", "write_id", "source_ids", "line_nos") '
         'SELECT "token_id", {write_id}, list_transform("nodes", k -> k.s), list_transform("nodes", k -> k.l) '
         'FROM (SELECT "token_id", list_sort(list({{\'s\': "source_id", \'l\': "line_no"}})) AS "nodes" '
         'FROM "node_token_index" WHERE "source_id" BETWEEN {low} AND {high} GROUP BY "token_id") ORDER BY "token_id"')


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table('node_token_index_writes',
    sa.Column('write_id', sa.Integer(), nullable=False),
    sa.Column('source_id', sa.Integer(), nullable=False),
    )
    op.create_table('node_token_index_regrouped',
    sa.Column('token_id', sa.Integer(), nullable=False),
    sa.Column('write_id', sa.Integer(), nullable=False, comment='node_token_index_writes.write_id'),
    sa.Column('source_ids', sa.ARRAY(sa.Integer()), nullable=False,
              comment='the nodes holding the token in this write: source_ids[i], line_nos[i]'),
    sa.Column('line_nos', sa.ARRAY(sa.Integer()), nullable=False, comment='read in step with source_ids'),
    )
    counts = bind.exec_driver_sql('SELECT "source_id", count(*) FROM "node_token_index" '
                                  'GROUP BY 1 ORDER BY 1').fetchall()
    for write_id, sources in enumerate(_chunks(counts), start=1):
        op.execute(_FILL.format(write_id=write_id, low=sources[0], high=sources[-1]))
        op.execute('INSERT INTO "node_token_index_writes" ("write_id", "source_id") VALUES '
                   + ", ".join(f"({write_id}, {int(s)})" for s in sources))
    op.drop_table('node_token_index')
    op.rename_table('node_token_index_regrouped', 'node_token_index')


def _chunks(counts: list[tuple[int, int]]) -> list[list[int]]:
    """Consecutive sources, at most _ENTRIES_PER_WRITE entries a chunk (or one source)."""
    chunks, current, entries = [], [], 0
    for source_id, n in counts:
        if current and entries + n > _ENTRIES_PER_WRITE:
            chunks.append(current)
            current, entries = [], 0
        current.append(int(source_id))
        entries += n
    return chunks + ([current] if current else [])


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
