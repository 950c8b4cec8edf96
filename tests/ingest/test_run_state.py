"""A run's lifecycle row through the record API: started, beaten, ended, each inside the
caller's transaction (warehouse.db.transaction)."""
from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from ingest.run_state import RunStart, record_end, record_heartbeat, record_start
from tests.ingest.helpers import make_db, rows
from warehouse.db import connect, transaction

T0 = datetime(2026, 11, 29, 8, 15)
START = RunStart(run_id="r1", trainer="train run", started_at=T0, heartbeat_every_s=30.0, host="gpu-07", pid=4242)
COLUMNS = ('"trainer", "started_at", "heartbeat_at", "heartbeat_every_s", "ended_at", "end_status", '
           '"exit_reason", "host", "pid"')


def _write(url: str, work) -> None:
    with connect(url) as con:
        transaction(con, lambda: work(con))


def _row(url: str) -> tuple | None:
    found = rows(url, f'SELECT {COLUMNS} FROM "run_lifecycle" WHERE "run_id" = ?', [START.run_id])
    return found[0] if found else None


@pytest.fixture
def url(tmp_path):
    return make_db(tmp_path)


def test_a_start_beats_and_ends(url):
    _write(url, lambda con: record_start(con, START))
    assert _row(url) == ("train run", T0, T0, 30.0, None, None, None, "gpu-07", 4242)
    _write(url, lambda con: record_heartbeat(con, START, T0 + timedelta(seconds=30)))
    assert _row(url)[2] == T0 + timedelta(seconds=30)
    _write(url, lambda con: record_end(con, START, T0 + timedelta(seconds=45), "failed", "ValueError: bad"))
    ended = T0 + timedelta(seconds=45)
    assert _row(url) == ("train run", T0, ended, 30.0, ended, "failed", "ValueError: bad", "gpu-07", 4242)


def test_a_beat_of_a_run_without_a_row_records_its_start_and_an_ended_run_keeps_its_last_beat(url):
    _write(url, lambda con: record_heartbeat(con, START, T0 + timedelta(seconds=5)))  # the start met a lock
    assert _row(url)[1:3] == (T0, T0 + timedelta(seconds=5))
    _write(url, lambda con: record_end(con, START, T0 + timedelta(seconds=6), "finished", "completed"))
    _write(url, lambda con: record_heartbeat(con, START, T0 + timedelta(seconds=99)))  # a late beat
    assert _row(url)[2] == T0 + timedelta(seconds=6)


def test_a_restart_of_a_run_id_replaces_its_row(url):
    _write(url, lambda con: record_end(con, START, T0 + timedelta(seconds=6), "stopped", "KeyboardInterrupt"))
    again = RunStart(**{**START.__dict__, "trainer": "train rm", "started_at": T0 + timedelta(hours=1), "pid": 7})
    _write(url, lambda con: record_start(con, again))
    assert rows(url, 'SELECT count(*) FROM "run_lifecycle"') == [(1,)]
    later = T0 + timedelta(hours=1)
    assert _row(url) == ("train rm", later, later, 30.0, None, None, None, "gpu-07", 7)


def test_nothing_lands_when_the_callers_transaction_fails(url):
    def fails(con):
        record_start(con, START)
        raise RuntimeError("the round broke")

    with pytest.raises(RuntimeError):
        _write(url, fails)
    assert _row(url) is None
