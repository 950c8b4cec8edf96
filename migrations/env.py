"""Alembic environment: runs migrations on the connection `warehouse.migrate` hands over.

DuckDB has no Alembic dialect implementation of its own; `warehouse.migrate.DuckDBImpl` is
the one duckdb_engine's documentation recommends (transactional DDL, default behaviour).
"""
from __future__ import annotations

from alembic import context

from warehouse.migrate import DuckDBImpl  # noqa: F401 - registers the dialect with Alembic
from warehouse.schema import metadata


def run_migrations() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        from sqlalchemy import create_engine

        engine = create_engine(context.config.get_main_option("sqlalchemy.url"))
        with engine.begin() as connection:
            _run(connection)
        engine.dispose()
    else:
        _run(connection)


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
