"""Where the warehouse lives: `--db`, then `$ROLLOUT_WAREHOUSE_DB`, then `./warehouse.duckdb`."""
from __future__ import annotations

import os
from pathlib import Path

DB_ENV_VAR = "ROLLOUT_WAREHOUSE_DB"
DEFAULT_DB_FILE = "warehouse.duckdb"


def resolve_db_url(db: str | os.PathLike | None = None) -> str:
    """Turn a path or URL into a SQLAlchemy URL (`duckdb:///abs/path.duckdb`).

    Accepts `None` (env var, then the default file in the working directory), a plain file
    path, or any SQLAlchemy URL (`duckdb:///...`, `duckdb:///:memory:`).
    """
    value = str(db) if db is not None else os.environ.get(DB_ENV_VAR) or DEFAULT_DB_FILE
    if "://" in value:
        return value
    if value == ":memory:":
        return "duckdb:///:memory:"
    return f"duckdb:///{Path(value).expanduser().resolve()}"


def db_path_from_url(url: str) -> str:
    """The file path (or `:memory:`) behind a `duckdb:///` URL."""
    prefix = "duckdb:///"
    if not url.startswith(prefix):
        raise ValueError(f"not a DuckDB URL: {url}")
    rest = url[len(prefix):].split("?", 1)[0]
    return rest or ":memory:"
