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


# --- padded writes (warehouse/rowgroups.py) ---------------------------------------------------

def _held(con, table: str) -> int:
    """Rows the table holds in the file, deleted ones included."""
    return con.execute("SELECT estimated_size FROM duckdb_tables() WHERE database_name = current_database() "
                       "AND table_name = ?", [table]).fetchone()[0]


def _append(con, src: int, n: int, tokens: int = 3) -> None:
    """`n` payloads of `tokens` tokens from source `src`, in a padded transaction."""
    from warehouse.db import transaction

    rows = (f"SELECT {src}, i, list_transform(range({tokens}), x -> (x * 31 + i) % 50000)::INTEGER[], "
            f"list_transform(range({tokens}), x -> -(x % 7) / 3.0) FROM range({n}) AS t(i)")
    transaction(con, lambda: con.execute(INSERT + rows))


def test_a_padded_write_rejoins_no_row_group_and_leaves_no_pad_visible(tmp_path):
    from warehouse.rowgroups import leftover_pads

    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    upgrade(url)
    with connect(url) as con:
        # as an earlier version left it: a last row group of 700 rows, unpadded
        con.execute(INSERT + PAYLOAD_ROWS.format(src=1, n=ROW_GROUP_SIZE + 700))
        con.execute("CHECKPOINT")
        before = _row_group_blocks(con, "node_payloads")
        assert sorted(before) == [0, 1]
        _append(con, 2, 2)
        con.execute("CHECKPOINT")
        after = _row_group_blocks(con, "node_payloads")
        assert _held(con, "node_payloads") == ROW_GROUP_SIZE + 700 + ROW_GROUP_SIZE  # the 2 and 2,046 pads
        assert leftover_pads(con) == {}
        assert con.execute("SELECT count(*), min(source_id) FROM node_payloads").fetchone() == (ROW_GROUP_SIZE + 702, 1)
        assert con.execute("SELECT min(rowid) FROM node_payloads WHERE source_id = 2").fetchone()[0] == ROW_GROUP_SIZE + 700
        # the partly filled row group as well as the full one: the very same blocks
        for group in before:
            assert after[group] == before[group]
        assert sorted(after) == [0, 1, 2]
        # the control: an unpadded append (a bare INSERT) joins the last row group, rewritten
        con.execute(INSERT + PAYLOAD_ROWS.format(src=3, n=2))
        con.execute("CHECKPOINT")
        assert _row_group_blocks(con, "node_payloads")[2] != after[2]


def test_a_small_write_writes_as_much_into_a_large_warehouse_as_into_a_small_one(tmp_path):
    """Append cost as a ratio: the payload blocks a 2-payload write adds, into a warehouse of
    300 payloads and into one of 6,900 (3 full row groups and a partial one before padding)."""
    written = {}
    for name, held in (("small", 300), ("large", 3 * ROW_GROUP_SIZE + 756)):
        url = f"duckdb:///{tmp_path / name}.duckdb"
        upgrade(url)
        with connect(url) as con:
            for src, start in enumerate(range(0, held, 1000), start=1):  # a write per 1,000
                _append(con, src, min(1000, held - start), tokens=600)
            con.execute("CHECKPOINT")
            before = {b for blocks in _row_group_blocks(con, "node_payloads").values() for b in blocks}
            _append(con, 99, 2, tokens=600)
            con.execute("CHECKPOINT")
            after = {b for blocks in _row_group_blocks(con, "node_payloads").values() for b in blocks}
            written[name] = len(after - before)
            assert before <= after  # every block held before is still held: nothing rewritten
    assert written["small"] > 0
    assert written["large"] / written["small"] == 1.0


def test_pads_an_interrupted_write_left_go_with_the_next_write(tmp_path):
    from warehouse import rowgroups

    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    upgrade(url)
    with connect(url) as con:
        con.execute("BEGIN TRANSACTION")  # a write killed between its COMMIT and the pads' deletion
        con.execute(INSERT + PAYLOAD_ROWS.format(src=1, n=10))
        assert rowgroups.pad(con)
        con.execute("COMMIT")
        assert rowgroups.leftover_pads(con) == {"node_payloads": ROW_GROUP_SIZE - 10}
        _append(con, 2, 5)
        assert rowgroups.leftover_pads(con) == {}
        assert con.execute("SELECT source_id, count(*) FROM node_payloads GROUP BY 1 ORDER BY 1").fetchall() == [
            (1, 10), (2, 5)]
        assert _held(con, "node_payloads") == 2 * ROW_GROUP_SIZE  # every pad deleted keeps its place


def test_a_transaction_that_appends_no_token_arrays_pads_nothing(tmp_path):
    from warehouse.db import transaction

    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    upgrade(url)
    with connect(url) as con:
        _append(con, 1, 10)
        transaction(con, lambda: con.execute("INSERT INTO ingest_errors (source_id, line_no, path, reason) "
                                             "VALUES (1, 99, 'x', 'y')"))
        con.execute("DELETE FROM node_payloads WHERE line_no = 3")  # a delete keeps its row's place
        _append(con, 2, 1)
        assert _held(con, "node_payloads") == 2 * ROW_GROUP_SIZE
        assert _held(con, "node_train_tokens") == 0
        transaction(con, lambda: con.execute(  # the trainer's per-token record is padded the same way
            "INSERT INTO node_train_tokens (source_id, line_no, run_id, trainer_logprobs) "
            "SELECT 1, i, 'r', [-0.5, -1.0] FROM range(5) AS t(i)"))
        assert _held(con, "node_train_tokens") == ROW_GROUP_SIZE
        assert con.execute("SELECT count(*), min(source_id) FROM node_train_tokens").fetchone() == (5, 1)


def test_ingest_pads_and_a_write_after_compact_rewrites_nothing(small_sample_root, tmp_path):
    from ingest.pipeline import ingest_roots
    from warehouse.maintenance import COMPACT_CHUNK_ROWS, compact
    from warehouse.rowgroups import PADDED_TABLES, leftover_pads

    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    upgrade(url)
    assert ingest_roots(url, [small_sample_root]).exit_code == 0
    with connect(url, read_only=True) as con:
        counts = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in PADDED_TABLES}
        assert counts["node_payloads"] > 0
        assert leftover_pads(con) == {}
        assert _held(con, "node_payloads") % ROW_GROUP_SIZE == 0  # each batch its own row groups
    compact(url)  # the copy is padded as a write is: COMPACT_CHUNK_ROWS payloads a row group at most
    with connect(url) as con:
        assert {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in PADDED_TABLES} == counts
        assert _held(con, "node_payloads") % ROW_GROUP_SIZE == 0 and leftover_pads(con) == {}
        live = con.execute(f'SELECT max(n) FROM (SELECT count(*) AS n FROM "node_payloads" '
                           f'GROUP BY rowid // {ROW_GROUP_SIZE})').fetchone()[0]
        assert live == min(counts["node_payloads"], COMPACT_CHUNK_ROWS)
        before = _row_group_blocks(con, "node_payloads")
        _append(con, 10_000, 2)
        con.execute("CHECKPOINT")
        after = _row_group_blocks(con, "node_payloads")
        assert all(after[group] == before[group] for group in before)
        assert leftover_pads(con) == {}


def test_pads_keep_each_row_groups_source_range_its_own(tmp_path):
    """A pad row carries a source id its transaction wrote (and a negative line number), so
    each row group's source id range, which a read by (source_id, line_no) skips row groups
    by, is that of the records in it: a read of one source skips every other write's row
    groups. Pads an interrupted write left under the same source id go with the next write."""
    import re

    from warehouse import rowgroups
    from warehouse.db import transaction

    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    upgrade(url)
    with connect(url) as con:
        for src in (5, 7, 9):
            _append(con, src, 300)
        con.execute("BEGIN TRANSACTION")  # killed between its COMMIT and the pads' deletion
        con.execute(INSERT + "SELECT 11, i, [1], [-0.5] FROM range(1, 4) AS t(i)")
        assert rowgroups.pad(con)
        con.execute("COMMIT")
        assert rowgroups.leftover_pads(con) == {"node_payloads": ROW_GROUP_SIZE - 3}
        transaction(con, lambda: con.execute(INSERT + "SELECT 11, i, [2], [-0.5] FROM range(4, 9) AS t(i)"))
        assert rowgroups.leftover_pads(con) == {}
        con.execute("CHECKPOINT")
        ranges = [tuple(int(v) for v in re.findall(r"(?:Min|Max): (-?\d+)", stats))
                  for (stats,) in con.execute("SELECT stats FROM pragma_storage_info('node_payloads') WHERE "
                                              "column_name = 'source_id' AND segment_type = 'INTEGER' "
                                              "ORDER BY row_group_id").fetchall()]
        assert ranges == [(5, 5), (7, 7), (9, 9), (11, 11), (11, 11)]
        assert con.execute("SELECT source_id, count(*) FROM node_payloads GROUP BY 1 ORDER BY 1").fetchall() == [
            (5, 300), (7, 300), (9, 300), (11, 8)]
