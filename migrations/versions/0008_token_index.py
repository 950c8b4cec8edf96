"""Add node_token_index: each payload's distinct response token ids, so a token id is found across all runs without unrolling every array.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06

The index of the payloads already held is built here, sorted by token id (warehouse/tokens.py);
from then on every write of payloads writes its index rows with them.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# this revision's frozen copy of warehouse.tokens.INDEX_ROWS over node_payloads
_FILL = ('INSERT INTO "node_token_index" ("token_id", "source_id", "line_no") '
         'SELECT DISTINCT "token_id", "source_id", "line_no" FROM ('
         'SELECT "source_id", "line_no", unnest("response_token_ids") AS "token_id" FROM "node_payloads") '
         'WHERE "token_id" IS NOT NULL ORDER BY "token_id", "source_id", "line_no"')


def upgrade() -> None:
    op.create_table('node_token_index',
    sa.Column('token_id', sa.Integer(), nullable=False),
    sa.Column('source_id', sa.Integer(), nullable=False, comment="the node's"),
    sa.Column('line_no', sa.Integer(), nullable=False, comment="the node's"),
    )
    op.execute(_FILL)


def downgrade() -> None:
    op.drop_table('node_token_index')
