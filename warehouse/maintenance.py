"""`warehouse cleanup`: remove the Parquet files a DuckLake warehouse no longer needs.

Two kinds, each removed by DuckLake's own function:

* orphaned files: written by a writer that never committed them (killed with -9 during a
  commit, or stopped by a full disk); no snapshot references them
  (`ducklake_delete_orphaned_files`);
* files scheduled for deletion: replaced by compaction or expired snapshots
  (`ducklake_cleanup_old_files`).

A writer that is running has written files it has not committed yet, which look exactly
like orphans, so only files older than `older_than_s` are touched (default an hour, far
longer than any of our transactions; 0 only when no writer runs). A DuckDB file has neither
kind: a transaction it never committed leaves nothing behind.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from warehouse.errors import TerminalError

DEFAULT_OLDER_THAN_S = 3600.0
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass
class Cleaned:
    orphaned: list[str]     # never committed by anyone
    scheduled: list[str]    # replaced or expired, past their retention

    @property
    def paths(self) -> list[str]:
        return self.orphaned + self.scheduled


def parse_age(text: str) -> float:
    """'90s', '30m', '1h', '2d' or plain seconds -> seconds."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not found:
        raise TerminalError(f"not an age: {text!r}. Use e.g. 90s, 30m, 1h or 2d.")
    return float(found.group(1)) * _UNITS[found.group(2) or "s"]


def cleanup(url: str, older_than_s: float = DEFAULT_OLDER_THAN_S, dry_run: bool = False) -> Cleaned:
    """Delete (or with `dry_run` only list) the lake's orphaned and expired files older than
    `older_than_s`. Nothing to do on a DuckDB file."""
    from warehouse.config import is_ducklake
    from warehouse.db import LAKE_ALIAS, connect
    from warehouse.revision import require_head

    if not is_ducklake(url):
        return Cleaned([], [])
    with connect(url) as con:
        require_head(con, url)
        found = {}
        for kind, function in (("orphaned", "ducklake_delete_orphaned_files"),
                               ("scheduled", "ducklake_cleanup_old_files")):
            rows = con.execute(
                f"CALL {function}('{LAKE_ALIAS}', dry_run => ?, "
                "older_than => now() - to_microseconds(CAST(? AS BIGINT)))",
                [dry_run, int(older_than_s * 1e6)]).fetchall()
            found[kind] = sorted(r[0] for r in rows)
    return Cleaned(**found)


# --- compact: a DuckDB file rewritten without its free blocks ---------------------------------

@dataclass
class Compacted:
    path: str
    bytes_before: int
    bytes_after: int


def compact(url: str) -> Compacted:
    """Rewrite the warehouse file without the free blocks that rewritten row groups left.

    Every table and view is copied (`COPY FROM DATABASE`) into `PATH.compact`, under the write
    lock, which then replaces the file in one rename. A reader attached meanwhile keeps reading
    the file it opened; the next connection opens the compact one. DuckLake has no free blocks:
    its files are merged by DuckLake's own maintenance (docs/ducklake.md).
    """
    import os

    from warehouse.config import db_path_from_url, is_ducklake
    from warehouse.db import ROW_GROUP_SIZE, connect, file_alias, quote_identifier
    from warehouse.revision import require_head

    if is_ducklake(url):
        raise TerminalError("warehouse compact rewrites a DuckDB file; a DuckLake warehouse has no free "
                            "blocks (merge its small files with DuckLake's ducklake_merge_adjacent_files).")
    path = db_path_from_url(url)
    if path == ":memory:" or not os.path.exists(path):
        raise TerminalError(f"no warehouse at {path}. Run 'warehouse --db {path} init' first.")
    target = path + ".compact"
    with connect(url) as con:
        require_head(con, url)
        con.execute("CHECKPOINT")
        before = os.path.getsize(path)
        for leftover in (target, target + ".wal"):  # a compaction killed midway
            if os.path.exists(leftover):
                os.remove(leftover)
        quoted = "'" + target.replace("'", "''") + "'"
        con.execute(f"ATTACH {quoted} AS _compact (ROW_GROUP_SIZE {ROW_GROUP_SIZE})")
        try:
            con.execute(f"COPY FROM DATABASE {quote_identifier(file_alias(path))} TO _compact")
        finally:
            con.execute("DETACH _compact")
        os.replace(target, path)
    return Compacted(path, before, os.path.getsize(path))
