"""Group node_token_index by write: rows per token id and write of payloads, naming its nodes, so the index holds far fewer row groups.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06

0008's index held one row per (token id, node): for a 1.3 GB root of 4,800 nodes, 80.6 M rows
in 39,365 row groups of 2,048 rows, whose statistics a lookup read one by one and whose list
every checkpoint rewrote. Now a row holds a token id, a write, and up to 1,024 of the
write's nodes that hold it (`source_ids`, `line_nos`); `node_token_index_writes` names the
sources of each write (warehouse/tokens.py). The entries held become one write, built in
token id ranges of about _ENTRIES_PER_PASS entries (so memory stays bounded); the downgrade
unrolls them again.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_ENTRIES_PER_PASS = 8_000_000
# this revision's frozen copy of warehouse.tokens' index rows (NODES_PER_ROW 1,024) over 0008's rows
_FILL = ('INSERT INTO "node_token_index_regrouped" ("token_id", "write_id", "source_ids", "line_nos") '
         'SELECT "token_id", 1, list_transform("chunk", k -> k.s), list_transform("chunk", k -> k.l) '
         'FROM (SELECT "token_id", "start", "nodes"["start" + 1:"start" + 1024] AS "chunk" '
         'FROM (SELECT "token_id", "nodes", unnest(range(0, len("nodes"), 1024)) AS "start" '
         'FROM (SELECT "token_id", list_sort(list({{\'s\': "source_id", \'l\': "line_no"}})) AS "nodes" '
         'FROM "node_token_index" WHERE "token_id" BETWEEN {low} AND {high} GROUP BY "token_id"))) '
         'ORDER BY "token_id", "start"')


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
    low, high, entries = bind.exec_driver_sql(
        'SELECT min("token_id"), max("token_id"), count(*) FROM "node_token_index"').fetchone()
    for start, end in _ranges(low, high, entries):
        op.execute(_FILL.format(low=start, high=end))
    op.execute('INSERT INTO "node_token_index_writes" ("write_id", "source_id") '
               'SELECT DISTINCT 1, "source_id" FROM "node_payloads" ORDER BY 2')
    op.drop_table('node_token_index')
    op.rename_table('node_token_index_regrouped', 'node_token_index')


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
