"""Add step_metrics: the trainer's per-step loss, KL, clip fraction, grad norm, memory.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('step_metrics',
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('step', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('loss', sa.Double(), nullable=True),
    sa.Column('pg_loss', sa.Double(), nullable=True),
    sa.Column('kl', sa.Double(), nullable=True),
    sa.Column('clip_frac', sa.Double(), nullable=True),
    sa.Column('grad_norm', sa.Double(), nullable=True),
    sa.Column('entropy', sa.Double(), nullable=True),
    sa.Column('tokens', sa.BigInteger(), nullable=True),
    sa.Column('micro_batches', sa.Integer(), nullable=True),
    sa.Column('peak_mem_gib', sa.Double(), nullable=True),
    sa.Column('lr', sa.Double(), nullable=True),
    sa.Column('extra', sa.JSON(), nullable=True),
    sa.PrimaryKeyConstraint('run_id', 'step')
    )


def downgrade() -> None:
    op.drop_table('step_metrics')
