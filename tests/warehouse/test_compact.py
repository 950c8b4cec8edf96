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


def test_compact_refuses_a_missing_file_and_ducklake(tmp_path):
    runner = CliRunner()
    missing = runner.invoke(main, ["--db", str(tmp_path / "none.duckdb"), "compact"])
    assert missing.exit_code == 1 and "no warehouse at" in missing.output
    lake = runner.invoke(main, ["--db", f"ducklake:sqlite:{tmp_path / 'c.sqlite'}", "compact"])
    assert lake.exit_code == 1 and "DuckLake" in lake.output and "Traceback" not in lake.output
