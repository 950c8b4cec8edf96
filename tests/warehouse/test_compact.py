"""`warehouse compact`: the file without its free blocks, every row, key and view kept."""
from __future__ import annotations

import os

import duckdb
import pytest
from click.testing import CliRunner

from warehouse.cli import main
from warehouse.db import connect
from warehouse.migrate import init_db
from warehouse.schema import TABLE_NAMES

PAYLOADS = ("INSERT INTO node_payloads (source_id, line_no, response_token_ids, response_logprobs) "
            "SELECT {src}, i, range(i % 500), [-(j % 97) / 10.0 FOR j IN range(i % 500)] FROM range(6000) AS t(i)")


def _rows(url: str) -> dict:
    with connect(url, read_only=True) as con:
        return {t: con.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall() for t in TABLE_NAMES}


def test_compact_drops_the_free_blocks_and_keeps_every_row(tmp_path):
    path = tmp_path / "wh.duckdb"
    url = f"duckdb:///{path}"
    init_db(url)
    with connect(url) as con:
        for src in (1, 2, 3):
            con.execute(PAYLOADS.format(src=src))
            con.execute("CHECKPOINT")
        con.execute("DELETE FROM node_payloads WHERE source_id < 3")  # their blocks become free
        con.execute("CHECKPOINT")
    before, rows = os.path.getsize(path), _rows(url)
    result = CliRunner().invoke(main, ["--db", str(path), "compact"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Compacted {path}: ")
    assert os.path.getsize(path) < 0.7 * before
    assert _rows(url) == rows and len(rows["node_payloads"]) == 6000
    assert not os.path.exists(f"{path}.compact")
    with connect(url) as con:  # keys and views came along
        with pytest.raises(duckdb.ConstraintException):
            con.execute(PAYLOADS.format(src=3))
        assert con.execute('SELECT count(*) FROM "node_tokens"').fetchone()[0] == 0  # no nodes: no tokens


def test_compact_refuses_a_missing_file_and_an_empty_lake(tmp_path):
    runner = CliRunner()
    missing = runner.invoke(main, ["--db", str(tmp_path / "none.duckdb"), "compact"])
    assert missing.exit_code == 1 and "no warehouse at" in missing.output
    lake = runner.invoke(main, ["--db", f"ducklake:sqlite:{tmp_path / 'c.sqlite'}", "compact"])
    assert lake.exit_code == 1 and "warehouse init" in lake.output and "Traceback" not in lake.output


def test_compact_on_ducklake_merges_each_tables_files_and_keeps_every_row(small_sample_root, tmp_path, monkeypatch):
    """A lake ingested a file a commit holds a data file per commit in each table; compact
    merges them (node_token_index left as written), every table and view reads the same after,
    and a second compact has nothing left to merge. The payloads merge
    under their file and row-group sizes, which compact sets on a lake made without them."""
    from ingest.pipeline import ingest_roots
    from warehouse import migrate
    from warehouse.config import resolve_db_url
    from warehouse.maintenance import LAKE_LEFT_AS_WRITTEN, _lake_files
    from warehouse.migrate import PAYLOAD_ROW_GROUP_SIZE

    url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'lake.sqlite'}", tmp_path / "files")
    with monkeypatch.context() as before:  # a lake made before node_payloads had options: compact sets them
        before.setitem(migrate.LAKE_TABLE_OPTIONS, "node_payloads", {})
        init_db(url)
    ingest_roots(url, [str(small_sample_root)], batch_bytes=1)  # a commit per file

    def state():
        with connect(url, read_only=True) as con:
            files = {t: _lake_files(con, t) for t in TABLE_NAMES}
            rows = {t: [tuple(f"{v:.12g}" if isinstance(v, float) else v for v in row)
                        for row in con.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall()]
                    for t in (*TABLE_NAMES, "run_metrics", "round_metrics", "node_parents")}
        return files, rows  # floats to 12 digits: a view's sums over merged files add in another order

    files, rows = state()
    assert files["nodes"] > 2 and files["node_payloads"] > 2

    def payload_options() -> dict:
        with connect(url, read_only=True) as con:
            return dict(con.execute("SELECT option_name, value FROM wh.options() WHERE scope_entry = "
                                    "'main.node_payloads'").fetchall())

    assert payload_options() == {}
    result = CliRunner().invoke(main, ["--db", url, "compact"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Merged the data files of ") and "warehouse cleanup" in result.output
    merged, after = state()
    assert after == rows and len(rows["nodes"]) > 0
    assert all(merged[t] == 1 for t, n in files.items() if n > 1 and t not in LAKE_LEFT_AS_WRITTEN)
    assert merged["nodes"] == 1  # small tables' rows are inlined in the catalog: no file to merge
    assert all(merged[t] == files[t] for t in LAKE_LEFT_AS_WRITTEN)
    assert sum(merged.values()) < sum(files.values())
    assert payload_options() == {"parquet_row_group_size": str(PAYLOAD_ROW_GROUP_SIZE), "target_file_size": "32000000"}
    again = CliRunner().invoke(main, ["--db", url, "compact"])
    assert again.exit_code == 0 and again.output.startswith("Merged the data files of 0 tables"), again.output


def test_a_lake_payload_merge_that_runs_out_of_memory_is_rolled_back_and_named(small_sample_root, tmp_path,
                                                                                 monkeypatch):
    """node_payloads merges on one thread; when that merge runs out of memory (here DuckDB's
    memory_limit at 1 MB while it runs) its commit is rolled back: the payloads keep their
    files and rows, the other tables are still merged, and the output names the table and
    the setting to change."""
    import contextlib

    from ingest.pipeline import ingest_roots
    from warehouse import maintenance
    from warehouse.config import resolve_db_url

    url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'lake.sqlite'}", tmp_path / "files")
    init_db(url)
    ingest_roots(url, [str(small_sample_root)], batch_bytes=1)  # a commit per file
    alone = maintenance.one_thread

    @contextlib.contextmanager
    def starved(con):
        with alone(con), maintenance.setting(con, "memory_limit", "1MB"):
            yield

    def state():
        with connect(url, read_only=True) as con:
            return ({t: maintenance._lake_files(con, t) for t in ("nodes", "node_payloads")},
                    con.execute('SELECT * FROM "node_payloads" ORDER BY ALL').fetchall())

    (files, payloads) = state()
    monkeypatch.setattr(maintenance, "one_thread", starved)
    result = CliRunner().invoke(main, ["--db", url, "compact"])
    assert result.exit_code == 0, result.output
    assert f"node_payloads ({maintenance.OUT_OF_MEMORY})" in result.output and "Traceback" not in result.output
    (after, kept) = state()
    assert files["node_payloads"] > 2 and after["node_payloads"] == files["node_payloads"] and kept == payloads
    assert files["nodes"] > 2 and after["nodes"] == 1
    monkeypatch.setattr(maintenance, "one_thread", alone)
    again = CliRunner().invoke(main, ["--db", url, "compact"])
    assert again.exit_code == 0 and "ran out of memory" not in again.output, again.output
    assert state() == ({"nodes": 1, "node_payloads": 1}, payloads)


def test_compact_copies_under_the_scan_share_and_gives_the_budget_back(tmp_path, monkeypatch):
    """Each table is copied with DuckDB's cache at SCAN_SHARE of the budget (every block is read
    once; the rest is left to the buffers memory_limit does not count). A copy that fails inside
    its transaction is rolled back before the budget is given back: its own error is the one
    raised, and the file is as it was."""
    import warehouse.maintenance as maintenance
    from warehouse.config import memory_limit, memory_limit_bytes
    from warehouse.db import SCAN_SHARE

    path = tmp_path / "wh.duckdb"
    url = f"duckdb:///{path}"
    init_db(url)
    with connect(url) as con:
        con.execute(PAYLOADS.format(src=1))
    rows = _rows(url)
    copy_rows, seen, fail = maintenance._copy_rows, [], [True]

    def watched(con, source, table, chunked):
        seen.append((table, con.execute("SELECT current_setting('memory_limit')").fetchone()[0]))
        if table == '"node_payloads"' and fail[0]:
            con.execute("BEGIN TRANSACTION")
            con.execute("SELECT error('copy failed')")  # leaves the transaction aborted
        copy_rows(con, source, table, chunked)

    monkeypatch.setattr(maintenance, "_copy_rows", watched)
    with duckdb.connect() as con:  # DuckDB's own spelling of the two limits
        share, budget = (con.execute(f"SET memory_limit = '{limit}'; SELECT current_setting('memory_limit')").fetchone()[0]
                         for limit in (f"{int(memory_limit_bytes(memory_limit()) * SCAN_SHARE)}B", memory_limit()))
    with pytest.raises(duckdb.Error, match="copy failed"):
        maintenance.compact(url)
    assert {limit for _, limit in seen} == {share} != {budget} and _rows(url) == rows
    fail[0] = False
    seen.clear()
    maintenance.compact(url)
    assert {limit for _, limit in seen} == {share} and ('"node_payloads"', share) in seen
    assert _rows(url) == rows and not os.path.exists(f"{path}.compact")
