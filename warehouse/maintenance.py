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

import contextlib
import re
from dataclasses import dataclass, field

from warehouse.errors import TerminalError
from warehouse.rowgroups import PADDED_TABLES, PADS, ROW_GROUP_SIZE

DEFAULT_OLDER_THAN_S = 3600.0
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass
class Cleaned:
    orphaned: list[str]     # never committed by anyone
    scheduled: list[str]    # replaced or expired, past their retention
    expired: list[int] = field(default_factory=list)  # snapshots expired (with expire_older_than_s)

    @property
    def paths(self) -> list[str]:
        return self.orphaned + self.scheduled


def parse_age(text: str) -> float:
    """'90s', '30m', '1h', '2d' or plain seconds -> seconds."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not found:
        raise TerminalError(f"not an age: {text!r}. Use e.g. 90s, 30m, 1h or 2d.")
    return float(found.group(1)) * _UNITS[found.group(2) or "s"]


def cleanup(url: str, older_than_s: float = DEFAULT_OLDER_THAN_S, dry_run: bool = False,
            expire_older_than_s: float | None = None) -> Cleaned:
    """Delete (or with `dry_run` only list) the lake's orphaned and expired files older than
    `older_than_s`; with `expire_older_than_s`, first expire the snapshots older than that
    (`ducklake_expire_snapshots`: no time travel to them), so that the files only they read
    (rows deleted or replaced since: a merged token index's batch files, rewritten rows) are
    scheduled for deletion and, with `older_than_s` 0, deleted now. Nothing to do on a DuckDB
    file."""
    from warehouse.config import is_ducklake
    from warehouse.db import LAKE_ALIAS, connect
    from warehouse.revision import require_head

    if not is_ducklake(url):
        return Cleaned([], [])
    with connect(url) as con:
        require_head(con, url)
        found = {}
        if expire_older_than_s is not None:  # snapshot ids only: the rows' TIMESTAMPTZ columns need pytz
            found["expired"] = sorted(r[0] for r in con.execute(
                f"SELECT snapshot_id FROM ducklake_expire_snapshots('{LAKE_ALIAS}', dry_run => ?, "
                "older_than => now() - to_microseconds(CAST(? AS BIGINT)))",
                [dry_run, int(expire_older_than_s * 1e6)]).fetchall())
        for kind, function in (("orphaned", "ducklake_delete_orphaned_files"),
                               ("scheduled", "ducklake_cleanup_old_files")):
            rows = con.execute(
                f"CALL {function}('{LAKE_ALIAS}', dry_run => ?, "
                "older_than => now() - to_microseconds(CAST(? AS BIGINT)))",
                [dry_run, int(older_than_s * 1e6)]).fetchall()
            found[kind] = sorted(r[0] for r in rows)
    return Cleaned(**found)


# --- compact: a DuckDB file rewritten without its free blocks; a lake's small files merged -----

@dataclass
class Compacted:
    path: str
    bytes_before: int
    bytes_after: int


@dataclass
class Merged:
    """A lake's compaction: its tables' data files before and after, and the tables left as written."""
    files_before: int
    files_after: int
    tables: int
    left: tuple[str, ...]


#: The lake tables `compact` leaves as written. Merging the token index's lists holds a whole
#: output file in memory, and a lookup reads one row group of each write's files, not by the
#: scans that pay per file.
LAKE_LEFT_AS_WRITTEN = ("node_token_index",)
#: Lake tables `compact` merges on one thread, after setting their LAKE_TABLE_OPTIONS (a lake
#: made before those has none): merging token arrays holds an output row group's arrays in
#: memory, and those options bound the files (warehouse.migrate.PAYLOAD_FILE_SIZE) and their
#: row groups.
LAKE_MERGED_ALONE = ("node_payloads",)
#: Why a table was left as written though `compact` merges it: a merge that ran out of memory
#: is rolled back, and its table keeps the files it had.
OUT_OF_MEMORY = "its merge ran out of memory: a larger --memory-limit merges it"


def compact(url: str) -> Compacted | Merged:
    """Rewrite the warehouse file without the free blocks that rewritten row groups left; on
    DuckLake, merge each table's small Parquet files (`compact_lake`).

    The schema (`COPY FROM DATABASE ... (SCHEMA)`: tables, keys, indexes, views), then each
    table's rows (`_copy_rows`) go into `PATH.compact`, under the write lock, which then
    replaces the file in one rename. A reader attached meanwhile keeps reading the file it
    opened; the next connection opens the compact one.
    """
    import os

    from warehouse.config import db_path_from_url, is_ducklake
    from warehouse.db import connect, file_alias, quote_identifier, scan_share
    from warehouse.revision import require_head

    if is_ducklake(url):
        return compact_lake(url)
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
        source = quote_identifier(file_alias(path))
        with scan_share(con):  # every block is read once: the rest is left to the row group being compressed
            try:
                con.execute(f"COPY FROM DATABASE {source} TO _compact (SCHEMA)")  # tables, keys, indexes, views
                tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = ? "
                                                    "AND schema_name = 'main' ORDER BY 1", [file_alias(path)]).fetchall()]
                con.execute("USE _compact")  # where `pad` pads
                for table in tables:
                    _copy_rows(con, source, quote_identifier(table), chunked=table in PADDED_TABLES)
            except BaseException:
                with contextlib.suppress(Exception):  # a failed statement leaves its transaction aborted
                    con.execute("ROLLBACK")
                raise
            finally:
                con.execute(f"USE {source}")
                con.execute("DETACH _compact")
        os.replace(target, path)
    return Compacted(path, before, os.path.getsize(path))


#: Rows of a table of token arrays each row group of the compacted file holds (padded to a
#: whole row group, as a write pads: warehouse/rowgroups.py). DuckDB reads a LIST column a
#: vector of 2,048 rows at a time, so one payload read by its key costs what its row group's
#: live payloads hold: 0.11-0.15 s among 2,048 payloads of ~18 K tokens, 0.005-0.007 s among
#: an ingest batch's ~220. A statement of this many rows also bounds `compact`'s memory.
COMPACT_CHUNK_ROWS = 256


def _copy_rows(con, source: str, table: str, chunked: bool) -> None:
    """A table's live rows into `_compact` (the connection's current database), in row id
    order. A table of token arrays goes COMPACT_CHUNK_ROWS rows a transaction, each padded to a
    whole row group and its pads deleted after its commit, as an ingest batch is written; the
    pads an interrupted write left in the source are not copied."""
    insert = f"INSERT INTO _compact.main.{table} SELECT * FROM {source}.main.{table}"
    if not chunked:
        con.execute(insert)
        return
    live = f"NOT ({PADS})"
    bounds = con.execute(f'SELECT min(rowid), max(rowid) FROM (SELECT rowid, (row_number() OVER (ORDER BY rowid) - 1) '
                         f'// {COMPACT_CHUNK_ROWS} AS "chunk" FROM {source}.main.{table} WHERE {live}) '
                         'GROUP BY "chunk" ORDER BY 1').fetchall()
    from warehouse.db import transaction  # pads before its COMMIT, drops the pads after it

    for low, high in bounds:
        transaction(con, lambda low=low, high=high: con.execute(
            f"{insert} WHERE rowid BETWEEN {int(low)} AND {int(high)} AND {live}"))


def compact_lake(url: str) -> Merged:
    """Merge each DuckLake table's data files into as few as DuckLake's target size allows
    (`ducklake_merge_adjacent_files`, a table per commit, redone when another writer's commit
    wins): every commit of an ingest or a round writes a file per table it touches, and every
    scan plans and opens each file, so a view over a table of many small files (the run page
    reads some forty) pays per file. LAKE_LEFT_AS_WRITTEN are not merged; LAKE_MERGED_ALONE
    on one thread, into files and row groups of their LAKE_TABLE_OPTIONS. Readers keep their
    snapshot; the replaced files stay until `warehouse cleanup` deletes them."""
    from warehouse.db import LAKE_ALIAS, connect
    from warehouse.revision import require_head

    with connect(url) as con:
        require_head(con, url)
        tables = [t for (t,) in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' "
            "ORDER BY table_name", [LAKE_ALIAS]).fetchall()]
        before = after = merged = 0
        left = list(LAKE_LEFT_AS_WRITTEN)
        for table in tables:
            files = _lake_files(con, table)
            before += files
            if table not in LAKE_LEFT_AS_WRITTEN and files > 1:
                if _merge_lake_table(con, table):
                    merged += 1
                else:
                    left.append(f"{table} ({OUT_OF_MEMORY})")
                files = _lake_files(con, table)
            after += files
    return Merged(before, after, merged, tuple(left))


def _merge_lake_table(con, table: str) -> bool:
    """One table's `ducklake_merge_adjacent_files` in a commit of its own; a table of
    LAKE_MERGED_ALONE under its LAKE_TABLE_OPTIONS, on one thread. False when that merge ran out
    of memory (rolled back: the table keeps its files)."""
    import duckdb

    from warehouse.db import LAKE_ALIAS, transaction
    from warehouse.migrate import lake_table_options

    merge = f"CALL ducklake_merge_adjacent_files('{LAKE_ALIAS}', ?)"
    if table not in LAKE_MERGED_ALONE:
        transaction(con, lambda: con.execute(merge, [table]).fetchall())
        return True
    transaction(con, lambda: [con.execute(statement) for statement in lake_table_options(table)])
    try:
        with one_thread(con):
            transaction(con, lambda: con.execute(merge, [table]).fetchall())
    except duckdb.OutOfMemoryException:
        return False
    return True


def one_thread(con):
    """DuckDB on one thread while the block runs: a merge holds one output row group's arrays,
    not one per thread."""
    return setting(con, "threads", 1)


@contextlib.contextmanager
def setting(con, name: str, value):
    """DuckDB's setting `name` at `value` on `con` while the block runs, as it was after it."""
    was = con.execute(f"SELECT current_setting('{name}')").fetchone()[0]
    con.execute(f"SET {name} = '{value}'")
    try:
        yield
    finally:
        con.execute(f"SET {name} = '{was}'")


def _lake_files(con, table: str) -> int:
    from warehouse.db import LAKE_ALIAS

    return con.execute(f"SELECT count(*) FROM ducklake_list_files('{LAKE_ALIAS}', ?)", [table]).fetchone()[0]
