"""Where the warehouse lives: `--db`, then `$ROLLOUT_WAREHOUSE_DB`, then `./warehouse.duckdb`.

Two engines behind one schema:

* a DuckDB file (`PATH` or `duckdb:///PATH`): the default, one writing process at a time;
* DuckLake (`ducklake:sqlite:PATH` or `ducklake:postgres:CONNINFO`): Parquet files under a
  data path plus a catalog database, for many writers and readers at once (docs/ducklake.md).
  The data path is given once, when the catalog is created (`--data-path DIR` or
  `$ROLLOUT_WAREHOUSE_DATA_PATH`); DuckLake stores it in the catalog for every later open.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DB_ENV_VAR = "ROLLOUT_WAREHOUSE_DB"
MEMORY_ENV_VAR = "ROLLOUT_WAREHOUSE_MEMORY_LIMIT"
# DuckDB's memory_limit for every connection: what it may hold before spilling to disk (its
# buffers; Python, Arrow batches and the process itself come on top). 2 GB keeps a command's
# whole process under about 3 GB whatever the warehouse holds (benchmarks/scale_bench.py).
DEFAULT_MEMORY_LIMIT = "2GB"
_MEMORY_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
                 "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_memory_limit: str | None = None  # set by the command line's --memory-limit
DATA_PATH_ENV_VAR = "ROLLOUT_WAREHOUSE_DATA_PATH"
TASKS_ROOT_ENV = "TRAIN_TASKS_ROOT"  # the trainer's task folders when no --tasks-root is given (train.env.tasks)
DEFAULT_DB_FILE = "warehouse.duckdb"
DUCKLAKE_PREFIX = "ducklake:"
DUCKLAKE_CATALOGS = ("sqlite", "postgres")
_DATA_PATH_MARK = "#data_path="


@dataclass(frozen=True)
class DuckLakeTarget:
    """A parsed `ducklake:` URL: the catalog database and, if given, the data path."""

    catalog: str  # "sqlite" or "postgres"
    location: str  # the SQLite file (absolute) or the PostgreSQL conninfo
    data_path: str | None = None

    @property
    def attach_string(self) -> str:
        return f"{DUCKLAKE_PREFIX}{self.catalog}:{self.location}"


def resolve_db_url(db: str | os.PathLike | None = None, data_path: str | os.PathLike | None = None) -> str:
    """Turn a path or URL into the URL every connection takes.

    Accepts `None` (env var, then the default file in the working directory), a plain file
    path, any SQLAlchemy URL (`duckdb:///...`, `duckdb:///:memory:`), or a DuckLake URL
    (`ducklake:sqlite:PATH`, `ducklake:postgres:CONNINFO`), to which `data_path` (else
    `$ROLLOUT_WAREHOUSE_DATA_PATH`) is attached.
    """
    value = str(db) if db is not None else os.environ.get(DB_ENV_VAR) or DEFAULT_DB_FILE
    if value.startswith(DUCKLAKE_PREFIX):
        return _resolve_ducklake(value, data_path or os.environ.get(DATA_PATH_ENV_VAR))
    if "://" in value:
        return _supported_url(value)
    if value == ":memory:":
        return "duckdb:///:memory:"
    return f"duckdb:///{Path(value).expanduser().resolve()}"


def _supported_url(value: str) -> str:
    """A duckdb:// URL as given; any other scheme is one error naming what works."""
    from warehouse.errors import TerminalError

    if value.startswith("duckdb:///"):
        return value
    scheme = value.split("://", 1)[0]
    hint = {"duckdb": " (three slashes before a relative path, four before an absolute one)","postgres": " (a PostgreSQL catalog: ducklake:postgres:CONNINFO)",
            "postgresql": " (a PostgreSQL catalog: ducklake:postgres:CONNINFO)",
            "sqlite": " (a SQLite catalog: ducklake:sqlite:PATH)",
            "s3": " (files on object storage: a DuckLake catalog with --data-path s3://...)"}
    raise TerminalError(
        f"unsupported warehouse URL {value!r}{hint.get(scheme.split('+')[0], '')}. Use a DuckDB file "
        "(PATH or duckdb:///PATH) or DuckLake (ducklake:sqlite:PATH, ducklake:postgres:CONNINFO).")


def _resolve_ducklake(value: str, data_path) -> str:
    target = parse_ducklake(value)
    location = target.location
    if target.catalog == "sqlite":
        location = str(Path(location).expanduser().resolve())
    data = target.data_path or (str(data_path) if data_path else None)
    if data and "://" not in data:  # a local or mounted directory (object storage keeps its URL)
        data = str(Path(data).expanduser().resolve()) + os.sep
    url = f"{DUCKLAKE_PREFIX}{target.catalog}:{location}"
    return url + (f"{_DATA_PATH_MARK}{data}" if data else "")


def is_ducklake(url: str) -> bool:
    return url.startswith(DUCKLAKE_PREFIX)


def parse_ducklake(url: str) -> DuckLakeTarget:
    """Split `ducklake:CATALOG:LOCATION[#data_path=DIR]`; a clear error for anything else."""
    from warehouse.errors import TerminalError

    rest, _, data_path = url[len(DUCKLAKE_PREFIX):].partition(_DATA_PATH_MARK)
    catalog, sep, location = rest.partition(":")
    if catalog not in DUCKLAKE_CATALOGS or not sep or not location.strip():
        raise TerminalError(
            f"not a DuckLake URL: {url!r}. Use ducklake:sqlite:PATH or ducklake:postgres:CONNINFO "
            "(e.g. ducklake:postgres:'dbname=warehouse host=localhost').")
    return DuckLakeTarget(catalog, location, data_path or None)


def db_path_from_url(url: str) -> str:
    """The file path (or `:memory:`) behind a `duckdb:///` URL."""
    prefix = "duckdb:///"
    if not url.startswith(prefix):
        raise ValueError(f"not a DuckDB URL: {url}")
    rest = url[len(prefix):].split("?", 1)[0]
    return rest or ":memory:"


def display_name(url: str) -> str:
    """How messages name the warehouse: the file's name, or the DuckLake catalog."""
    if is_ducklake(url):
        return parse_ducklake(url).attach_string
    return Path(db_path_from_url(url)).name


def set_memory_limit(value: str | None) -> None:
    """The budget every later connection of this process gets (None: the environment's or
    the default); a value DuckDB would not read is one error naming the setting."""
    global _memory_limit
    _memory_limit = None if value is None else parse_memory_limit(value, "--memory-limit")


def memory_limit() -> str:
    if _memory_limit is not None:
        return _memory_limit
    value = os.environ.get(MEMORY_ENV_VAR)
    return parse_memory_limit(value, f"${MEMORY_ENV_VAR}") if value else DEFAULT_MEMORY_LIMIT


def _size(value: str) -> tuple[str, str] | None:
    """A memory size's (number, unit), the unit upper-cased and one of _MEMORY_UNITS; None
    where it is not one."""
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?I?B)\s*", value.upper())
    return match.groups() if match and match.group(2) in _MEMORY_UNITS else None


def memory_limit_bytes(value: str) -> int | None:
    """A memory size ('2GB', '512MiB', as `parse_memory_limit` reads and returns them) in
    bytes; None where it is not one."""
    size = _size(value)
    return None if size is None else int(float(size[0]) * _MEMORY_UNITS[size[1]])


def parse_memory_limit(value: str, setting: str) -> str:
    """`value` as DuckDB reads a memory_limit ('2GB', '512MiB'), checked here."""
    from warehouse.errors import TerminalError

    size = _size(value)
    if size is None or float(size[0]) * _MEMORY_UNITS[size[1]] < 2**24:
        raise TerminalError(f"{setting}: {value!r} is not a memory size of at least 16MB "
                            "(e.g. 2GB, 512MB, 3GiB).")
    return f"{size[0]}{size[1].replace('IB', 'iB')}"
