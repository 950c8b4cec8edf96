"""The payload layout: an append never rewrites the row groups a warehouse already holds, and
migration 0006 moves an older warehouse's payloads into that layout with every row kept."""
from __future__ import annotations

import duckdb
import pytest

from warehouse.db import ROW_GROUP_SIZE, connect
from warehouse.migrate import upgrade

PAYLOAD_ROWS = "SELECT {src}, i, [i, i + 1, i + 2], [-0.5, -1.5, -2.5] FROM range({n}) AS t(i)"
INSERT = "INSERT INTO node_payloads (source_id, line_no, response_token_ids, response_logprobs) "


def _row_group_blocks(con, table: str) -> dict[int, set[int]]:
    """row group id -> the storage blocks its columns live in."""
    blocks: dict[int, set[int]] = {}
    for group, block in con.execute(f"SELECT row_group_id, block_id FROM pragma_storage_info('{table}') "
                                    "WHERE block_id >= 0").fetchall():
        blocks.setdefault(group, set()).add(block)
    return blocks


def _row_group_rows(con, table: str) -> list[int]:
    return [n for (n,) in con.execute(
        f"SELECT max(\"count\") FROM pragma_storage_info('{table}') WHERE column_id = 0 "
        "GROUP BY row_group_id ORDER BY row_group_id").fetchall()]


def test_an_append_leaves_the_full_row_groups_as_they_were(tmp_path):
    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    upgrade(url)
    with connect(url) as con:
        con.execute(INSERT + PAYLOAD_ROWS.format(src=1, n=2 * ROW_GROUP_SIZE + 100))
        con.execute("CHECKPOINT")
        before = _row_group_blocks(con, "node_payloads")
        con.execute(INSERT + PAYLOAD_ROWS.format(src=2, n=2))
        con.execute("CHECKPOINT")
        after = _row_group_blocks(con, "node_payloads")
        assert _row_group_rows(con, "node_payloads") == [ROW_GROUP_SIZE, ROW_GROUP_SIZE, 102]
    full = [g for g in before if g < 2]
    assert full == [0, 1]
    for group in full:  # the full row groups' blocks are the very same: nothing rewrote them
        assert after[group] == before[group]


def test_migration_0006_regroups_an_older_warehouse_keeping_every_row(tmp_path):
    path = tmp_path / "old.duckdb"
    url = f"duckdb:///{path}"
    upgrade(url, "0005")
    old = duckdb.connect(str(path))  # as a writer before 0006 wrote it: DuckDB's default row groups
    try:
        old.execute(INSERT + PAYLOAD_ROWS.format(src=7, n=3 * ROW_GROUP_SIZE))
        old.execute("CHECKPOINT")
        assert _row_group_rows(old, "node_payloads") == [3 * ROW_GROUP_SIZE]
        digest = old.execute("SELECT count(*), sum(hash(source_id, line_no, response_token_ids, "
                             "response_logprobs)) FROM node_payloads").fetchone()
    finally:
        old.close()
    assert upgrade(url, "0006") == "0006"
    with connect(url) as con:
        con.execute("CHECKPOINT")
        assert _row_group_rows(con, "node_payloads") == [ROW_GROUP_SIZE] * 3
        assert con.execute("SELECT count(*), sum(hash(source_id, line_no, response_token_ids, "
                           "response_logprobs)) FROM node_payloads").fetchone() == digest
        with pytest.raises(duckdb.ConstraintException):  # the key survived the move
            con.execute(INSERT + PAYLOAD_ROWS.format(src=7, n=1))


def test_an_ingest_commit_checkpoints_instead_of_logging_the_open_row_group(tmp_path):
    """Under checkpoint_each_commit a commit that appends payloads leaves no WAL (DuckDB
    otherwise logs the table's whole open row group, then writes it again at the checkpoint),
    and the full row groups stay as they were."""
    import os

    from warehouse.db import checkpoint_each_commit

    path = tmp_path / "w.duckdb"
    url = f"duckdb:///{path}"
    upgrade(url)
    wal = f"{path}.wal"
    with connect(url) as con:
        con.execute(INSERT + PAYLOAD_ROWS.format(src=1, n=ROW_GROUP_SIZE + 1000))
        con.execute("CHECKPOINT")
        before = _row_group_blocks(con, "node_payloads")
        con.execute(INSERT + PAYLOAD_ROWS.format(src=2, n=2))  # as DuckDB's default does: logged
        assert os.path.exists(wal) and os.path.getsize(wal) > 0
        con.execute("CHECKPOINT")
        checkpoint_each_commit(con)
        con.execute("BEGIN TRANSACTION")
        con.execute(INSERT + PAYLOAD_ROWS.format(src=3, n=2))
        con.execute("COMMIT")
        assert not os.path.exists(wal) or os.path.getsize(wal) == 0
        assert _row_group_blocks(con, "node_payloads")[0] == before[0]
    with connect(url, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM node_payloads WHERE source_id = 3").fetchone()[0] == 2
