"""Our own exception types. The CLI's error boundary prints these as one line.

`TerminalError`s will fail the same way on retry; `TransientError`s (a locked database,
say) may succeed if the caller waits and tries again.
"""
from __future__ import annotations


class WarehouseError(Exception):
    """Base of every error the CLI reports as one `Error: ...` line."""

    exit_code = 1


class TerminalError(WarehouseError):
    """Retrying will not help: the input, the schema or the request is wrong."""


class TransientError(WarehouseError):
    """Retrying may help: the database is locked by another writer, a resource is busy."""


class SchemaVersionError(TerminalError):
    """The database is not at the schema version this code needs."""


class DatabaseLockedError(TransientError):
    """Another process holds the write lock on the warehouse file."""


class QueryError(TerminalError):
    """A user's SQL failed (syntax, missing table, ...)."""


def translate(exc: BaseException) -> WarehouseError | None:
    """Map a raw driver error to one of ours (the one place this happens), else None."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    try:
        import duckdb
    except ImportError:  # pragma: no cover
        duckdb = None
    if duckdb is not None and isinstance(exc, duckdb.IOException) and "lock" in text.lower():
        return DatabaseLockedError(
            f"the warehouse is locked by another writer ({text}). Wait for it to finish or "
            "open read-only."
        )
    if duckdb is not None and isinstance(exc, duckdb.Error):
        return QueryError(str(exc).strip())  # every line: DuckDB's hints follow the first
    try:
        from sqlalchemy.exc import DBAPIError
    except ImportError:  # pragma: no cover
        DBAPIError = ()
    if DBAPIError and isinstance(exc, DBAPIError) and exc.orig is not None:
        return translate(exc.orig) or QueryError(text)
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError)):
        return TerminalError(text)
    return None
