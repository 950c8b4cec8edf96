"""Add wandb_runs and wandb_history for optional W&B export copies.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('wandb_runs',
    sa.Column('wandb_run', sa.String(), nullable=False),
    sa.Column('config', sa.JSON(), nullable=True),
    sa.Column('summary', sa.JSON(), nullable=True),
    sa.Column('config_source_id', sa.Integer(), nullable=True),
    sa.Column('summary_source_id', sa.Integer(), nullable=True),
    sa.PrimaryKeyConstraint('wandb_run')
    )
    op.create_table('wandb_history',
    sa.Column('source_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('line_no', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('wandb_run', sa.String(), nullable=False),
    sa.Column('step', sa.Integer(), nullable=True, comment="the row's `_step` or `step`"),
    sa.Column('row', sa.JSON(), nullable=False, comment='the whole history row'),
    sa.PrimaryKeyConstraint('source_id', 'line_no')
    )


def downgrade() -> None:
    op.drop_table('wandb_history')
    op.drop_table('wandb_runs')
