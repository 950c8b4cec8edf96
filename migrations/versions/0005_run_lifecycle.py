"""Add run_lifecycle: when a trainer started, last beat and ended a run, with its end status and reason.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('run_lifecycle',
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('trainer', sa.String(), nullable=True, comment='train run | train rm'),
    sa.Column('started_at', sa.DateTime(), nullable=False, comment='UTC, when the trainer recorded the run'),
    sa.Column('heartbeat_at', sa.DateTime(), nullable=True, comment='UTC, the last beat of a live trainer'),
    sa.Column('heartbeat_every_s', sa.Double(), nullable=True, comment='how often the trainer beats'),
    sa.Column('ended_at', sa.DateTime(), nullable=True, comment='UTC; NULL while running or when the trainer died unseen'),
    sa.Column('end_status', sa.String(), nullable=True, comment='finished | failed | stopped'),
    sa.Column('exit_reason', sa.String(), nullable=True, comment='why it ended: completed, the exception, KeyboardInterrupt'),
    sa.Column('host', sa.String(), nullable=True),
    sa.Column('pid', sa.Integer(), nullable=True),
    sa.PrimaryKeyConstraint('run_id')
    )


def downgrade() -> None:
    op.drop_table('run_lifecycle')
