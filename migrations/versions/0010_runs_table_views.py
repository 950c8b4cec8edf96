"""Reapply the views: run_metrics gains the runs table's headline columns, round_metrics the round headline and the gen phase's split, run_caps total_cap.

Revision ID: 0010
Revises: 0007
Create Date: 2026-12-06

Views only, no table changes. The views are reapplied by every upgrade that reaches head
(warehouse.migrate.apply_catalog); the revision exists so that a warehouse at 0007, whose
views lack the new columns, is told to run 'warehouse upgrade' rather than failing on a
missing column.
"""
from __future__ import annotations

revision = "0010"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
