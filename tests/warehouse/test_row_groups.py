"""The payload layout: an append never rewrites the row groups a warehouse already holds
(migration 0006 moves an older warehouse's payloads into that layout with every row kept),
logs only what it adds (the token arrays' tables have no key: migration 0011), and a small
write stays in the WAL, where readers and copies see it."""
from __future__ import annotations

import os

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


TRAIN_ROWS = ("INSERT INTO node_train_tokens (source_id, line_no, run_id, step, trainer_logprobs) "
              "SELECT {src}, i, 'r', 1, [-0.25, -0.5] FROM range({n}) AS t(i)")
DIGEST = {"node_payloads": "SELECT count(*), sum(hash(rowid, source_id, line_no, response_token_ids, "
                           "response_logprobs)) FROM node_payloads",
          "node_train_tokens": "SELECT count(*), sum(hash(rowid, source_id, line_no, trainer_logprobs)) "
                               "FROM node_train_tokens"}


def _keys(con, table: str) -> list[str]:
    return [t for (t,) in con.execute("SELECT constraint_type FROM duckdb_constraints() "
                                      f"WHERE table_name = '{table}' AND constraint_type = 'PRIMARY KEY'").fetchall()]


def _digests(url: str) -> dict:
    with connect(url, read_only=True) as con:
        return {table: con.execute(sql).fetchone() for table, sql in DIGEST.items()}


def _at_0010_with_rows(tmp_path, sources: int = 5):
    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    upgrade(url, "0010")
    with connect(url) as con:
        for src in range(1, sources + 1):
            con.execute(INSERT + PAYLOAD_ROWS.format(src=src, n=500))  # two chunks of the copy
        con.execute(TRAIN_ROWS.format(src=1, n=40))
        con.execute("CHECKPOINT")
        assert _keys(con, "node_payloads") == _keys(con, "node_train_tokens") == ["PRIMARY KEY"]
    return url


def test_migration_0011_drops_the_keys_keeping_every_row_in_its_order(tmp_path):
    url = _at_0010_with_rows(tmp_path)
    before = _digests(url)
    assert upgrade(url) == "0011"
    assert _digests(url) == before  # rowid in the hash: the same rows in the same order
    with connect(url) as con:
        assert _keys(con, "node_payloads") == _keys(con, "node_train_tokens") == []
        with pytest.raises(duckdb.ConstraintException):  # the key columns stay NOT NULL
            con.execute(INSERT + "VALUES (NULL, 1, [1], [-1.0])")
    from warehouse.migrate import downgrade

    assert downgrade(url, "0010") == "0010"
    assert _digests(url) == before
    with connect(url, read_only=True) as con:
        assert _keys(con, "node_payloads") == _keys(con, "node_train_tokens") == ["PRIMARY KEY"]


def test_an_interrupted_migration_0011_goes_on_from_its_last_committed_chunk(tmp_path):
    """Each chunk (a row group's rows) is committed: a killed upgrade leaves the new table
    part-filled and the revision at 0010; the next upgrade copies the rest, none twice."""
    url = _at_0010_with_rows(tmp_path)
    before = _digests(url)
    with connect(url) as con:  # what a kill after the first chunk leaves
        con.execute('CREATE TABLE "node_payloads_rekeyed" AS SELECT * FROM "node_payloads" '
                    f'WHERE rowid < {ROW_GROUP_SIZE}')
    assert upgrade(url) == "0011"
    assert _digests(url) == before
    with connect(url, read_only=True) as con:
        assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '%_rekeyed'").fetchone()[0]


def _wal_after_append(path, rows_held: int) -> int:
    """WAL bytes a 2-payload commit writes into a table already holding `rows_held` payloads
    (all in its open row group, checkpointed)."""
    con = duckdb.connect(":memory:")
    con.execute(f"ATTACH '{path}' AS w (ROW_GROUP_SIZE {ROW_GROUP_SIZE})")
    try:
        if rows_held:
            con.execute("INSERT INTO w.node_payloads (source_id, line_no, response_token_ids, response_logprobs) "
                        "SELECT 1, i, range(4000), list_transform(range(4000), x -> -x / 4000) FROM range(?) AS t(i)",
                        [rows_held])
        con.execute("CHECKPOINT w")
        con.execute("INSERT INTO w.node_payloads (source_id, line_no, response_token_ids, response_logprobs) "
                    "SELECT 2, i, range(4000), list_transform(range(4000), x -> -x / 4000) FROM range(2) AS t(i)")
        return os.path.getsize(f"{path}.wal")
    finally:
        con.execute("PRAGMA disable_checkpoint_on_shutdown")
        con.close()


def test_a_small_write_logs_what_it_adds_whatever_the_open_row_group_holds(tmp_path):
    """With a key, DuckDB logged the whole open row group with each append (two payloads added
    to 1,500 wrote 327 MB); without, what is added: the same bytes into an empty table and into
    one whose open row group is nearly full."""
    sizes = {}
    for held in (0, ROW_GROUP_SIZE - 48):
        url = f"duckdb:///{tmp_path / f'w{held}.duckdb'}"
        upgrade(url)
        sizes[held] = _wal_after_append(tmp_path / f"w{held}.duckdb", held)
    assert 0 < sizes[ROW_GROUP_SIZE - 48] <= 1.5 * sizes[0], sizes


def test_a_small_write_stays_in_the_wal_readers_and_copies_see_it(tmp_path, monkeypatch):
    import warehouse.db
    from warehouse.db import copy_warehouse, wal_bytes

    path = tmp_path / "w.duckdb"
    url = f"duckdb:///{path}"
    upgrade(url)
    with connect(url) as con:
        con.execute(INSERT + PAYLOAD_ROWS.format(src=1, n=3))
    assert 0 < wal_bytes(str(path)) < warehouse.db.LAZY_CHECKPOINT_BYTES  # left in the log
    with connect(url, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM node_payloads").fetchone()[0] == 3
    copy = copy_warehouse(path, tmp_path / "copy.duckdb")
    with connect(f"duckdb:///{copy}", read_only=True) as con:
        assert con.execute("SELECT count(*) FROM node_payloads").fetchone()[0] == 3
    monkeypatch.setattr(warehouse.db, "LAZY_CHECKPOINT_BYTES", 1)  # past the size: written in
    with connect(url) as con:
        con.execute(INSERT + PAYLOAD_ROWS.format(src=2, n=3))
    assert wal_bytes(str(path)) == 0
    with connect(url, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM node_payloads").fetchone()[0] == 6
