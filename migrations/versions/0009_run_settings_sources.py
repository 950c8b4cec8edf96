"""Add runs.settings_sources: where each recorded setting of a run came from (arm, --set, run, default, flag).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06

Runs already held keep NULL: their sources were never recorded, and the run page reads their
overrides as it did before.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('runs', sa.Column('settings_sources', sa.JSON(), nullable=True,
                                    comment='setting -> where its value came from: arm, --set, run, default or flag '
                                            '(train.settings.settings_of); NULL: not recorded (ingested data roots)'))


def downgrade() -> None:
    op.drop_column('runs', 'settings_sources')
