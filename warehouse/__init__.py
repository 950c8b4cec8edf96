"""The rollout warehouse: schema, migrations, views and data-quality checks.

`warehouse/` owns the schema; `ingest/` reads data roots into it; `train/` produces new rows.
"""
__version__ = "0.1.0"
