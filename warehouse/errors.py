"""Our own exception types. The CLI's error boundary prints these as one line.

`TerminalError`s will fail the same way on retry; `TransientError`s (a locked database,
say) may succeed if the caller waits and tries again.
"""
from __future__ import annotations

import errno
import os
import re


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


class DiskError(TerminalError):
    """A path the command must write is read-only, not ours to write, or its disk is full."""


#: How the OS words the three ways a write can fail, with the errno of each.
_DISK_REASONS = {"read-only file system": errno.EROFS, "permission denied": errno.EACCES,
                 "no space left on device": errno.ENOSPC}
#: DuckDB quotes the OS's reason after the file it failed on: `Could not write file "P": No
#: space left on device`. Only its error types for I/O, a failed commit or a failed checkpoint
#: count: a conversion error quotes the bad value, which a hostile line could word like this.
_DUCKDB_DISK_ERROR = re.compile(r'"/[^"]*": (' + "|".join(_DISK_REASONS) + ")", re.IGNORECASE)
_DUCKDB_DISK_TYPES = ("IOException", "TransactionException", "FatalException", "InternalException")


#: SQLite's SQLITE_FULL, as a DuckLake catalog's failed COMMIT quotes it (no file named).
CATALOG_FULL = "database or disk is full"


def disk_errno(exc: BaseException) -> int | None:
    """EROFS, EACCES or ENOSPC when `exc` (an OSError, or a DuckDB error that quotes one
    about a file it could not write) says a write failed for one of those reasons; else None."""
    if isinstance(exc, OSError):
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC):
            return errno.EACCES if exc.errno == errno.EPERM else exc.errno
        return None
    exc = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's error
    if type(exc).__name__ not in _DUCKDB_DISK_TYPES:
        return None
    found = _DUCKDB_DISK_ERROR.search(str(exc))
    if found:
        return _DISK_REASONS[found.group(1).lower()]
    return errno.ENOSPC if CATALOG_FULL in str(exc) else None


def disk_path(exc: BaseException) -> str | None:
    """The file a disk error names: the OSError's, or the one DuckDB quotes."""
    if isinstance(exc, OSError):
        return exc.filename
    found = _DUCKDB_DISK_ERROR.search(str(getattr(exc, "orig", None) or exc))
    return found.group(0).split('"')[1] if found else None


def free_space(path: str | os.PathLike) -> str:
    """'12.3 MB free' on the file system holding `path` (or its nearest existing parent)."""
    import shutil

    probe = os.path.abspath(path)
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    try:
        return f"{shutil.disk_usage(probe).free / 1e6:.1f} MB free"
    except OSError:
        return "free space unknown"


def disk_error(code: int, action: str, path: str | os.PathLike, fix: str) -> DiskError:
    """One line: what could not be done where, why, and the fix (a full disk's is always to
    free space; `fix` is for a read-only file system or a denied permission)."""
    if code == errno.ENOSPC:
        return DiskError(f"cannot {action} {path}: no space left on the device ({free_space(path)}). "
                         "Free space there and run the command again.")
    why = "read-only file system" if code == errno.EROFS else "permission denied"
    return DiskError(f"cannot {action} {path}: {why}. {fix}")


def probe_writable(directory: str | os.PathLike, action: str, fix: str) -> None:
    """Create `directory` and a file in it (then remove it): a read-only or full place fails
    here with one line, before any work is done."""
    import tempfile

    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory) as probe:
            probe.write(b"x")
            probe.flush()
    except OSError as exc:
        code = disk_errno(exc)
        if code is None:
            raise TerminalError(f"cannot {action} {directory}: {exc.strerror or exc}") from None
        raise disk_error(code, action, directory, fix) from None


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
    code = disk_errno(exc)
    if code is not None:
        path = disk_path(exc)
        if path:
            return disk_error(code, "write", path, "Point the command at a place you can write.")
        if CATALOG_FULL in str(exc):
            return DiskError("the DuckLake catalog's disk is full (SQLite: database or disk is full). "
                             "Free space where the catalog lives and run the command again.")
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
