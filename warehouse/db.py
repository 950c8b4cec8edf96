"""Connections to the warehouse.

Two ways in, both short-lived so the DuckDB file lock is held only while working:

* `engine(url)`: a SQLAlchemy engine (Alembic, BI-style access). NullPool, so a connection
  really closes (and releases the file) when the `with` block ends.
* `connect(url)`: a raw DuckDB connection for bulk work (ingest, views, checks), retried with
  backoff while another process holds the write lock.

A DuckLake URL (`ducklake:sqlite:PATH`, `ducklake:postgres:CONNINFO`) gives the same two: an
in-memory DuckDB with the lake attached as the default database `wh`, so every query, view
and migration reads as on the file. DuckLake takes no lock: writers commit optimistically,
and `transaction` repeats a transaction that lost the race to another writer's commit.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import random
import threading
import time
from collections.abc import Callable, Iterator

from warehouse.config import (DATA_PATH_ENV_VAR, DB_ENV_VAR, db_path_from_url, is_ducklake, memory_limit,
                              memory_limit_bytes, parse_ducklake)
from warehouse.errors import DatabaseLockedError, TerminalError, disk_errno, disk_error, probe_writable
from warehouse.rowgroups import ROW_GROUP_SIZE, drop_pads, pad

LOCK_RETRY_SECONDS = 30.0
# A new warehouse file is written in DuckDB's v1.0.0 storage format (header version 64), which
# every DuckDB from 1.0 on reads: the DuckDB CLI, JDBC/ODBC drivers and BI tools that carry an
# older DuckDB than ours (DuckDB 2.0 wrote a format none of them could open). Opening an
# existing file keeps its format.
STORAGE_COMPATIBILITY = {"storage_compatibility_version": "v1.0.0"}
# The WAL size past which a commit checkpoints instead of logging, for the commands that add
# payloads a commit at a time (ingest, a trainer's round): none. A commit that appends to a table with
# a key and LIST columns logs the table's whole open row group (390 MB of WAL for 2 payloads
# into a row group of 1,876), which the checkpoint after writes again; a commit that
# checkpoints writes it once. At 30x a 2-node run took 2.9-3.3 s instead of 4.4-4.7 s, peak
# 0.55 GB instead of 1.46 GB; the 1.3 GB root into an empty warehouse 74 s instead of 81 s,
# peak 1.9 GB instead of 2.3 GB, file 589 MB instead of 635 MB (RESULTS.md, issue 40).
WRITE_CHECKPOINT_THRESHOLD = "0b"


def checkpoint_each_commit(con) -> None:
    """Commits on `con` checkpoint rather than log to the WAL (WRITE_CHECKPOINT_THRESHOLD);
    a DuckLake connection has no WAL of its own and is left as it is."""
    if not is_ducklake_connection(con):
        con.execute(f"SET checkpoint_threshold = '{WRITE_CHECKPOINT_THRESHOLD}'")
LAKE_ALIAS = "wh"
# The extensions come as Python packages pinned to duckdb's own version (pyproject.toml):
# loaded from there, never downloaded at run time.
_EXTENSION_PACKAGES = {"ducklake": "duckdb_extension_ducklake",
                       "sqlite_scanner": "duckdb_extension_sqlite_scanner",
                       "postgres_scanner": "duckdb_extension_postgres_scanner",
                       "httpfs": "duckdb_extension_httpfs"}
# DuckDB checks an extension's signature on every LOAD by hashing the whole file: ducklake and
# sqlite_scanner are 36 MB each, 0.3 s of every DuckLake open (about half of attaching the
# lake). These files come from the packages installed beside duckdb's own library, which runs
# unchecked, so a lake's DuckDB starts with unsigned loads allowed, loads them and turns the
# check back on before any other statement (`_attach_lake`): every later LOAD is checked, a
# `warehouse sql` query's included.
_UNCHECKED_LOADS = {"allow_unsigned_extensions": True}


def engine(url: str, read_only: bool = False):
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    if is_ducklake(url):
        eng = sa.create_engine("duckdb:///:memory:", poolclass=NullPool,
                               connect_args={"config": {**_config(True, None), **_UNCHECKED_LOADS}})
        sa.event.listen(eng, "connect", lambda dbapi_con, _: _attach_lake(dbapi_con, url, read_only))
        eng.dialect.warehouse_ducklake = True  # read by warehouse.migrate (no keys, no indexes)
        # DuckLake rejects INSERT ... RETURNING, which SQLAlchemy adds to fetch inserted keys
        eng.dialect.insert_returning = eng.dialect.insert_executemany_returning = False
        return eng
    path = db_path_from_url(url)
    if path == ":memory:":
        return sa.create_engine(url, poolclass=NullPool, connect_args={"config": _config(read_only, path)})
    eng = sa.create_engine("duckdb:///:memory:", poolclass=NullPool,
                           connect_args={"config": _config(read_only, path)})
    sa.event.listen(eng, "connect", lambda dbapi_con, _: _attach_file(dbapi_con, path, read_only))
    return eng


def _config(read_only: bool, path: str | None) -> dict:
    """Every connection's settings: the memory budget, where DuckDB spills past it, and the
    storage format of a file it creates."""
    config = {"memory_limit": memory_limit(), "temp_directory": _temp_directory(path)}
    return config if read_only else {**config, **STORAGE_COMPATIBILITY}


#: The share of the memory budget DuckDB may cache table blocks in while a command reads each
#: block once (a token search, `compact`'s copy): the cache is of no use then, and a smaller
#: one leaves room for the buffers memory_limit does not count, the scan's and the writer's
#: (a row group of ~18 K-token payloads compressed on its way into a file).
SCAN_SHARE = 0.5


@contextlib.contextmanager
def scan_share(con, share: float = SCAN_SHARE) -> Iterator[None]:
    """DuckDB's memory_limit on `con` at `share` of the budget while the block runs, the whole
    budget again after it, however it ends (a transaction the block leaves aborted must be
    rolled back inside it)."""
    budget = memory_limit()
    con.execute(f"SET memory_limit = '{int(memory_limit_bytes(budget) * share)}B'")
    try:
        yield
    finally:
        con.execute(f"SET memory_limit = '{budget}'")


def _temp_directory(path: str | None) -> str:
    """Beside the file as DuckDB's own default (`PATH.tmp`); a DuckLake or in-memory
    warehouse spills under the system's temporary folder."""
    import tempfile

    if path and path != ":memory:":
        return path + ".tmp"
    return os.path.join(tempfile.gettempdir(), f"rollout-warehouse-{os.getuid()}.tmp")


def _attach_file(con, path: str, read_only: bool) -> None:
    """Attach the warehouse file, named as DuckDB names a file it opens (its stem), and use it."""
    options = ["READ_ONLY"] if read_only else [f"ROW_GROUP_SIZE {ROW_GROUP_SIZE}"]
    alias = quote_identifier(file_alias(path))
    con.execute(f"ATTACH '{_sql_text(path)}' AS {alias} ({', '.join(options)})")
    con.execute(f"USE {alias}")


def file_alias(path: str) -> str:
    """The catalog name of an attached warehouse file: its stem, as `duckdb.connect(path)` names it."""
    stem = os.path.basename(path).split(".")[0] or "warehouse"
    return stem if stem not in ("memory", "system", "temp", "main") else f"{stem}_warehouse"


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "lock" in text and ("conflicting" in text or "could not set lock" in text)


@contextlib.contextmanager
def connect(url: str, read_only: bool = False, wait_s: float = LOCK_RETRY_SECONDS) -> Iterator:
    """A raw DuckDB connection; waits (with backoff) up to `wait_s` for another writer."""
    if is_ducklake(url):
        con, shared = lake_connection(url, read_only), None
    else:
        con, shared = _file_connection(url, read_only, wait_s)
    try:
        yield con
    finally:
        _release_file(shared, con)


def _file_connection(url: str, read_only: bool, wait_s: float):
    import duckdb

    path = db_path_from_url(url)
    if read_only and path != ":memory:" and not os.path.exists(path):
        raise TerminalError(f"no warehouse at {path}. Run 'warehouse --db {path} init' first.")
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while True:
        try:
            return _open_file(path, read_only)
        except (duckdb.IOException, duckdb.ConnectionException, duckdb.BinderException, _ModeClash) as exc:
            # ConnectionException, _ModeClash: another thread of this process holds the file
            # open in the other mode (a trainer's heartbeat writing while its loop reads);
            # BinderException: this process opened it with duckdb.connect(path) itself. Either
            # lets go in milliseconds, so it is waited for like another process's lock
            in_process = _is_mode_clash(exc)
            if not (in_process or _is_lock_error(exc)):
                raise _file_open_error(exc, path) from None
            if time.monotonic() >= deadline:
                raise DatabaseLockedError(
                    f"{path} is locked by another process ({exc}). Wait for it to finish."
                ) from exc
            if in_process:  # this process lets go in milliseconds: look again soon
                time.sleep(0.01)
                continue
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


class _ModeClash(Exception):
    """The file is open in this process in the other mode (read-only against writable)."""


@dataclasses.dataclass
class _SharedFile:
    con: object  # the in-memory DuckDB with the file attached
    read_only: bool
    users: int = 0


# One DuckDB per warehouse file per process, as duckdb.connect(path) shares its instance: a
# file attached twice in one process is refused ("Unique file handle conflict"). Each user gets
# a cursor of it; the last one to close it closes the file, which releases the lock.
_FILES: dict[str, _SharedFile] = {}
_FILES_LOCK = threading.Lock()


def _open_file(path: str, read_only: bool):
    """A cursor on the process's DuckDB for `path`, with the file as its default database."""
    import duckdb

    if path == ":memory:":
        return duckdb.connect(path, config=_config(read_only, path)), None
    key = os.path.realpath(path)  # one file however its path is spelled
    with _FILES_LOCK:
        shared = _FILES.get(key)
        if shared is not None and shared.read_only != read_only:
            raise _ModeClash(path)
        if shared is None:
            con = duckdb.connect(":memory:", config=_config(read_only, path))
            try:
                _attach_file(con, path, read_only)
            except BaseException:
                con.close()
                raise
            shared = _FILES[key] = _SharedFile(con, read_only)
        shared.users += 1
        cursor = shared.con.cursor()
    try:
        cursor.execute(f"USE {quote_identifier(file_alias(path))}")
    except BaseException:
        _release_file(key, cursor)
        raise
    return cursor, key


def _release_file(key: str | None, cursor) -> None:
    cursor.close()
    if key is None:
        return
    with _FILES_LOCK:
        shared = _FILES[key]
        shared.users -= 1
        if shared.users == 0:
            del _FILES[key]
            shared.con.close()


def open_error(exc: Exception, url: str) -> Exception:
    """`exc` as one line with the fix when the warehouse file's disk is read-only or full."""
    return exc if is_ducklake(url) else _file_open_error(exc, db_path_from_url(url))


def _file_open_error(exc: Exception, path: str) -> Exception:
    """A warehouse file on a read-only or full file system: one line with the fix."""
    code = disk_errno(exc)
    if code is None:
        return exc
    if os.path.exists(path):
        return disk_error(code, "open the warehouse for writing at", path,
                          "Copy it to a place you can write, or use the commands that only read "
                          "(sql, tables, metrics, report, serve, export).")
    return disk_error(code, "create the warehouse at", path,
                      f"Create it where you can write: --db PATH (or ${DB_ENV_VAR}).")


def _is_mode_clash(exc: Exception) -> bool:
    text = str(exc)
    return isinstance(exc, _ModeClash) or "different configuration" in text or "Unique file handle conflict" in text


# --- DuckLake --------------------------------------------------------------------------------

def lake_connection(url: str, read_only: bool):
    """An in-memory DuckDB with the lake attached as `wh` and in use (the caller closes it)."""
    import duckdb

    # autoinstall off: an extension missing from the packages must fail here, not download
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False, **_UNCHECKED_LOADS,
                                             **_config(True, None)})
    try:
        _attach_lake(con, url, read_only)
    except BaseException:
        con.close()
        raise
    return con


def _attach_lake(con, url: str, read_only: bool, alias: str = LAKE_ALIAS, use: bool = True) -> None:
    """Load the extensions, attach the lake as `alias` and (`use`) make it the default database."""
    target = parse_ducklake(url)
    if target.catalog == "sqlite" and _new_sqlite_catalog(target.location, read_only):
        if not target.data_path:  # a new catalog: its files beside it unless told otherwise
            target = dataclasses.replace(target, data_path=target.location + ".files" + os.sep)
        _create_sqlite_catalog(target.location, target.data_path)
    elif target.catalog == "postgres" and target.data_path and not read_only:
        _probe_data_path(target.data_path)  # a new PostgreSQL catalog cannot be told from an old one
    scanner = "sqlite_scanner" if target.catalog == "sqlite" else "postgres_scanner"
    for name in ("ducklake", scanner):
        con.execute(f"LOAD '{extension_file(name)}'")
    # object storage (s3://, gs://, ...) for the data path: httpfs, an optional package
    if importlib.util.find_spec(_EXTENSION_PACKAGES["httpfs"]) or "://" in (target.data_path or ""):
        con.execute(f"LOAD '{extension_file('httpfs')}'")
    if con.execute("SELECT current_setting('allow_unsigned_extensions')").fetchone()[0]:
        con.execute("SET allow_unsigned_extensions = false")  # our packages' files are in: check the rest
    # ATTACH takes no bound parameters: the two values are quoted as SQL string literals
    options = [f"DATA_PATH '{_sql_text(target.data_path)}'"] if target.data_path else []
    options += ["READ_ONLY"] if read_only else []
    clause = f" ({', '.join(options)})" if options else ""
    try:
        con.execute(f"ATTACH '{_sql_text(target.attach_string)}' AS {alias}{clause}")
    except Exception as exc:  # noqa: BLE001 - one line naming the catalog and the fix
        reason = str(exc).strip().splitlines()[0]
        raise TerminalError(f"cannot open the DuckLake warehouse {target.attach_string}: {reason}") from None
    if not use:
        return
    con.execute(f"USE {alias}")
    # DuckLake's own retry would commit a transaction on top of a snapshot it never read
    # (two writers would both take max(source_id) + 1); transaction() redoes it instead.
    con.execute("SET ducklake_max_retry_count = 0")


def _sql_text(value: str) -> str:
    return value.replace("'", "''")


def _new_sqlite_catalog(path: str, read_only: bool) -> bool:
    """Whether the SQLite catalog is still to be created (reading one that is not: an error)."""
    if os.path.exists(path):
        return False
    if read_only:
        raise TerminalError(f"no warehouse at {path}. Run 'warehouse --db ducklake:sqlite:{path} "
                            "--data-path DIR init' first.")
    return True


def _probe_data_path(data_path: str) -> None:
    if "://" not in data_path:  # object storage is checked by its first write
        probe_writable(data_path, "write the DuckLake data files in",
                       f"Give a folder you can write: --data-path DIR (or ${DATA_PATH_ENV_VAR}).")


def _create_sqlite_catalog(path: str, data_path: str) -> None:
    """A new SQLite catalog starts in WAL mode, so readers never block a committing writer.
    A read-only or full place for it or for its data files fails here, before anything is
    created, with one line naming the option that moves it."""
    import sqlite3

    probe_writable(os.path.dirname(path) or ".", "create the DuckLake catalog in",
                   "Put the catalog where you can write: --db ducklake:sqlite:PATH.")
    _probe_data_path(data_path)
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA journal_mode=WAL")
    finally:
        con.close()


def extension_file(name: str) -> str:
    import duckdb

    package = _EXTENSION_PACKAGES[name]
    spec = importlib.util.find_spec(package)
    path = None
    if spec is not None and spec.submodule_search_locations:
        root = list(spec.submodule_search_locations)[0]
        path = os.path.join(root, "extensions", f"v{duckdb.__version__}", f"{name}.duckdb_extension")
    if path is None or not os.path.isfile(path):
        dist = package.replace("_", "-")
        raise TerminalError(f"DuckLake needs the {name} extension for DuckDB {duckdb.__version__}: "
                            f"pip install '{dist}=={duckdb.__version__}'")
    return path


def attach_source(con, url: str, alias: str) -> None:
    """Attach another warehouse (file or DuckLake) read-only to `con` as `alias`."""
    if is_ducklake(url):
        _attach_lake(con, url, read_only=True, alias=alias, use=False)
        return
    path = db_path_from_url(url)
    if not os.path.exists(path):
        raise TerminalError(f"no warehouse at {path}.")
    con.execute(f"ATTACH '{_sql_text(path)}' AS {alias} (READ_ONLY)")


def close_host_files(con) -> None:
    """Shut `con` off from the machine's files for good: DuckDB's external access off and the
    configuration locked, so no statement can read a host file (read_csv('/etc/hostname')),
    write one (COPY ... TO) or turn the setting back on. What the warehouse itself reads stays
    open: a DuckLake's data path and DuckDB's spill directory."""
    allowed = [con.execute("SELECT current_setting('temp_directory')").fetchone()[0]]
    if is_ducklake_connection(con):
        allowed += [r[0] for r in con.execute(
            f"SELECT data_path FROM ducklake_settings('{LAKE_ALIAS}')").fetchall() if r[0]]
    con.execute("SET allowed_directories = ?", [[d for d in allowed if d]])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def is_ducklake_connection(con) -> bool:
    row = con.execute("SELECT type FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    return bool(row) and row[0] == "ducklake"


def is_write_conflict(exc: BaseException) -> bool:
    """A DuckLake commit that lost to another writer's (or met a busy SQLite catalog)."""
    text = str(exc).lower()
    return any(s in text for s in ("database is locked", "failed to commit ducklake transaction",
                                   "conflict", "could not serialize", "duplicate key"))


def transaction(con, work: Callable, *, wait_s: float = LOCK_RETRY_SECONDS,
                before_retry: Callable | None = None):
    """BEGIN, `work()`, COMMIT; returns what `work` returned. On the file, a transaction
    that appended token arrays appends whole row groups (warehouse/rowgroups.py), so its
    checkpoint rewrites none written before.

    On DuckLake a transaction whose commit lost to another writer is rolled back and redone
    from the start (`before_retry()` first, to forget what the lost attempt did), with
    jittered backoff, for up to `wait_s`; then DatabaseLockedError. On the file nothing is
    retried: the file lock already serializes writers.
    """
    lake = is_ducklake_connection(con)
    deadline, delay = time.monotonic() + wait_s, 0.02
    while True:
        con.execute("BEGIN TRANSACTION")
        try:
            result = work()
            padded = not lake and pad(con)
            con.execute("COMMIT")
        except BaseException as exc:
            _rollback(con)
            if not (lake and isinstance(exc, Exception) and is_write_conflict(exc)) or disk_errno(exc):
                raise  # a full catalog's COMMIT fails as a lost race does: it is not one
            if time.monotonic() >= deadline:
                raise DatabaseLockedError(f"other writers kept winning the commit for {wait_s:.0f} s "
                                          f"({str(exc).strip().splitlines()[0]})") from exc
        else:
            if padded:
                drop_pads(con)
            return result
        if before_retry:
            before_retry()
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 1.5, 0.5)


def _rollback(con) -> None:
    with contextlib.suppress(Exception):  # a failed COMMIT has already ended the transaction
        con.execute("ROLLBACK")


def quote_identifier(name: str) -> str:
    """Quote a SQL identifier (never format user input into SQL any other way)."""
    return '"' + name.replace('"', '""') + '"'
