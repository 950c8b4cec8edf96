"""Regroup node_payloads into 2,048-row row groups, so an append never rewrites the rows already held.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06

Layout only: the table's columns and key stay as they are. A warehouse file written before
holds node_payloads in row groups of up to 122,880 rows, usually one, which every checkpoint
after an append rewrote whole (warehouse/db.py, ROW_GROUP_SIZE). The rows are copied, in
their order, into a table of the same definition on a connection that writes 2,048-row row
groups, which then takes the old one's name. DuckLake keeps each commit in Parquet files of
its own: nothing to do there.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_COLUMNS = ("source_id", "line_no", "prompt_messages", "raw_completion", "thinking", "code",
            "response_token_ids", "response_logprobs")


def upgrade() -> None:
    if getattr(op.get_bind().dialect, "warehouse_ducklake", False):
        return
    op.create_table('node_payloads_regrouped',
    sa.Column('source_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('line_no', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('prompt_messages', sa.JSON(), nullable=True),
    sa.Column('raw_completion', sa.String(), nullable=True),
    sa.Column('thinking', sa.String(), nullable=True),
    sa.Column('code', sa.String(), nullable=True),
    sa.Column('response_token_ids', sa.ARRAY(sa.Integer()), nullable=True),
    sa.Column('response_logprobs', sa.ARRAY(sa.Double()), nullable=True),
    sa.PrimaryKeyConstraint('source_id', 'line_no')
    )
    cols = ", ".join(f'"{c}"' for c in _COLUMNS)
    op.execute(f'INSERT INTO "node_payloads_regrouped" ({cols}) SELECT {cols} FROM "node_payloads"')
    op.drop_table('node_payloads')
    op.rename_table('node_payloads_regrouped', 'node_payloads')


def downgrade() -> None:
    """Nothing to undo: 0005 reads row groups of any size."""
