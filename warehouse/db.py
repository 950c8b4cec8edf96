"""Connections to the warehouse.

Two ways in, both short-lived so the DuckDB file lock is held only while working:

* `engine(url)`: a SQLAlchemy engine (Alembic, BI-style access). NullPool, so a connection
  really closes (and releases the file) when the `with` block ends.
* `connect(url)`: a raw DuckDB connection for bulk work (ingest, views, checks), retried with
  backoff while another process holds the write lock.
"""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

from warehouse.config import db_path_from_url
from warehouse.errors import DatabaseLockedError, TerminalError

LOCK_RETRY_SECONDS = 30.0


def engine(url: str, read_only: bool = False):
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    connect_args = {"read_only": True} if read_only else {}
    return sa.create_engine(url, poolclass=NullPool, connect_args=connect_args)


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "lock" in text and ("conflicting" in text or "could not set lock" in text)


@contextlib.contextmanager
def connect(url: str, read_only: bool = False, wait_s: float = LOCK_RETRY_SECONDS) -> Iterator:
    """A raw DuckDB connection; waits (with backoff) up to `wait_s` for another writer."""
    import duckdb

    path = db_path_from_url(url)
    if read_only and path != ":memory:" and not os.path.exists(path):
        raise TerminalError(f"no warehouse at {path}. Run 'warehouse --db {path} init' first.")
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(path, read_only=read_only)
            break
        except duckdb.IOException as exc:
            if not _is_lock_error(exc):
                raise
            if time.monotonic() >= deadline:
                raise DatabaseLockedError(
                    f"{path} is locked by another process ({exc}). Wait for it to finish."
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    try:
        yield con
    finally:
        con.close()


def quote_identifier(name: str) -> str:
    """Quote a SQL identifier (never format user input into SQL any other way)."""
    return '"' + name.replace('"', '""') + '"'


def transaction(con, work):
    """`work()` inside one transaction on `con`: committed whole, or rolled back on any error."""
    con.execute("BEGIN TRANSACTION")
    try:
        result = work()
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    return result
