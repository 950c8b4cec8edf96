"""Alembic migrations of the warehouse schema (`warehouse upgrade` runs them)."""
