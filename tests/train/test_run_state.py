"""Run state: a trainer records started, heartbeats and ended; run_state reads the five states."""
from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest

from ingest.run_state import record_start
from tests.train.test_run import TASK, CannedBackend, model_dir  # noqa: F401 - shared fixtures
from tests.train.rollout.conftest import tiny_model, tiny_tokenizer  # noqa: F401 - shared fixtures
from train.run_state import RunLife, end_of, recording, utc_now
from train.settings import RunOptions
from warehouse.db import connect


def state(db_url: str, run_id: str) -> dict:
    with connect(db_url, read_only=True) as con:
        cur = con.execute('SELECT * FROM "run_state" WHERE "run_id" = ?', [run_id])
        names = [d[0] for d in cur.description]
        row = cur.fetchone()
    return dict(zip(names, row)) if row else {}


def sql(db_url: str, query: str, *params) -> None:
    with connect(db_url) as con:
        con.execute(query, list(params))


@pytest.mark.parametrize("exc, status, reason", [
    (None, "finished", "completed"),
    (KeyboardInterrupt(), "stopped", "KeyboardInterrupt"),
    (SystemExit(143), "stopped", "SystemExit(143)"),
    (ValueError("bad shape\nmore lines"), "failed", "ValueError: bad shape"),
])
def test_end_of_names_the_status_and_reason(exc, status, reason):
    assert end_of(exc) == (status, reason)


def test_a_recorded_run_is_running_then_ends_with_its_exception(db_url):
    with pytest.raises(RuntimeError), recording(db_url, "train run", every_s=3600) as life:
        life.start("r1")
        life.round_started()
        live = state(db_url, "r1")
        assert (live["state"], live["trainer"], live["end_status"]) == ("running", "train run", None)
        assert live["started_at"] == live["heartbeat_at"] == live["last_activity_at"]
        raise RuntimeError("CUDA out of memory. Tried to allocate")
    ended = state(db_url, "r1")
    assert (ended["state"], ended["exit_reason"]) == ("failed", "RuntimeError: CUDA out of memory. Tried to allocate")
    assert ended["ended_at"] >= live["started_at"] and ended["silent_s"] is None


def test_interrupt_is_stopped_and_a_clean_return_is_finished(db_url):
    with pytest.raises(KeyboardInterrupt), recording(db_url, "train rm", every_s=3600) as life:
        life.start("stopped")
        raise KeyboardInterrupt
    with recording(db_url, "train rm", every_s=3600) as life:
        life.start("done")
    assert state(db_url, "stopped")["state"] == "stopped"
    assert (state(db_url, "done")["state"], state(db_url, "done")["exit_reason"]) == ("finished", "completed")


def test_heartbeat_moves_and_silence_past_the_threshold_is_lost(db_url):
    life = RunLife(db_url, "train run", every_s=30)
    life.run_id, life.started_at = "beating", utc_now() - timedelta(hours=1)
    with connect(db_url) as con:
        record_start(con, life.recorded_start())  # started an hour ago, last beat then
    before = state(db_url, "beating")
    assert before["state"] == "lost" and before["silent_s"] > before["lost_after_s"] == 120
    assert life.beat()
    after = state(db_url, "beating")
    assert after["state"] == "running" and after["heartbeat_at"] > before["heartbeat_at"]


def test_imported_and_dangling_runs(db_url):
    sql(db_url, "INSERT INTO runs (run_id, kind, lost) VALUES ('files', 'training', false), "
                "('gone', 'training', true)")
    sql(db_url, "INSERT INTO sources (source_id, path, kind, run_id, mtime_ns, ingested_at) "
                "VALUES (1, 'a', 'nodes', 'files', 1700000000000000000, now())")
    files = state(db_url, "files")
    assert files["state"] == "imported"
    assert str(files["last_activity_at"]) == "2023-11-14 22:13:20"  # the file's mtime, not the ingest time
    assert state(db_url, "gone")["state"] == "lost"


def test_a_run_killed_before_its_start_record_is_lost_not_imported(db_url):
    """A run row that `train run` claimed (train://) with no life recorded: killed before its
    start got in. Lost once silent past the threshold, running while its last commit is recent;
    a run from files stays imported."""
    sql(db_url, "INSERT INTO runs (run_id, kind, lost, source_path, started_at) VALUES "
                "('killed', 'training', false, 'train://killed', now() - INTERVAL 1 HOUR), "
                "('killed_no_clock', 'training', false, 'train://killed_no_clock', NULL), "
                "('committing', 'training', false, 'train://committing', now() - INTERVAL 1 HOUR), "
                "('ingested', 'training', false, '/data/runs/ingested', NULL)")
    sql(db_url, "INSERT INTO sources (source_id, path, kind, run_id, round, ingested_at) "
                "VALUES (91, 'train://committing/round_1/t', 'nodes', 'committing', 1, now())")
    for run_id in ("killed", "killed_no_clock"):
        row = state(db_url, run_id)
        assert row["state"] == "lost" and "killed before it began" in row["exit_reason"], row
    assert (state(db_url, "committing")["state"], state(db_url, "committing")["exit_reason"]) == ("running", None)
    assert (state(db_url, "ingested")["state"], state(db_url, "ingested")["exit_reason"]) == ("imported", None)


def test_train_run_records_its_life(db_url, model_dir, monkeypatch):
    import train.run

    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer))
    opts = RunOptions(model=str(model_dir), rounds=1, tasks=(TASK,), db_url=db_url, learn=False, seed=0,
                      sets={"siblings_per_expansion": "2", "expansions_per_round": "1"}, run_id="life_ok")
    train.run.run(opts, log=lambda line: None)
    assert (state(db_url, "life_ok")["state"], state(db_url, "life_ok")["trainer"]) == ("finished", "train run")

    def broken(*args, **kwargs):
        raise RuntimeError("the round broke")

    monkeypatch.setattr(train.run, "run_round", broken)
    with pytest.raises(RuntimeError):
        train.run.run(RunOptions(**{**opts.__dict__, "run_id": "life_bad"}), log=lambda line: None)
    bad = state(db_url, "life_bad")
    assert (bad["state"], bad["exit_reason"]) == ("failed", "RuntimeError: the round broke")


def test_a_read_waits_while_the_heartbeat_holds_the_file_in_this_process(db_url):
    """DuckDB refuses a read-only connection while this process has the file open to write (and
    the reverse); connect waits that out like another process's lock, so a beat never breaks
    the loop's reads."""
    import threading

    from warehouse.db import connect
    from warehouse.errors import DatabaseLockedError

    released = threading.Event()
    holding = threading.Event()

    def beat_like():
        with connect(db_url) as con:
            con.execute("SELECT 1")
            holding.set()
            released.wait(10)

    writer = threading.Thread(target=beat_like)
    writer.start()
    holding.wait(10)
    with pytest.raises(DatabaseLockedError):
        with connect(db_url, read_only=True, wait_s=0):
            pass
    threading.Timer(0.2, released.set).start()
    with connect(db_url, read_only=True, wait_s=30) as con:  # waits for the writer to let go
        assert con.execute("SELECT count(*) FROM run_lifecycle").fetchone() == (0,)
    writer.join()


def test_beats_from_the_thread_land_while_the_loop_reads(db_url):
    """A live RunLife beating as fast as it can while this thread keeps opening read-only
    connections: every read succeeds and the beats land."""
    with recording(db_url, "train run", every_s=0.001) as life:  # ended even when a read fails
        life.start("busy")
        first = state(db_url, "busy")["heartbeat_at"]
        for _ in range(40):
            state(db_url, "busy")
    ended = state(db_url, "busy")
    assert ended["state"] == "finished" and ended["heartbeat_at"] > first


EXITS_WHILE_BEATING = """
import sys, threading, time
from train.run_state import RunLife
beaten, beat = threading.Event(), RunLife.beat
RunLife.beat = lambda self: (beat(self), beaten.set())[0]
life = RunLife(sys.argv[1], "train run", every_s=0.001)
life.start("left")
beaten.wait(240)  # a beat has landed (however loaded the machine), and the thread beats on
time.sleep(0.2)
"""


def test_a_process_that_exits_while_its_heartbeat_runs_exits_with_its_own_code(db_url, tmp_path):
    # a RunLife never ended (its caller raised first): the beat thread was inside DuckDB when
    # the interpreter tore down, and the process died of SIGABRT instead of exiting 0
    done = subprocess.run([sys.executable, "-c", EXITS_WHILE_BEATING, db_url], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert state(db_url, "left")["heartbeat_at"] > state(db_url, "left")["started_at"]


def test_a_start_that_could_not_get_in_is_recorded_by_the_first_beat(db_url):
    life = RunLife(db_url, "train run", every_s=3600)
    life.run_id, life.started_at = "late", utc_now() - timedelta(seconds=5)  # as if start() met a lock
    assert state(db_url, "late") == {}
    assert life.beat()
    late = state(db_url, "late")
    assert late["state"] == "running" and late["started_at"] == life.started_at < late["heartbeat_at"]
    life.round_started()
    life.end(KeyboardInterrupt())
    assert state(db_url, "late")["state"] == "stopped"


@pytest.mark.parametrize("error", ["duckdb", "disk_error"])
def test_a_full_warehouse_disk_leaves_the_start_and_end_unrecorded_with_a_line_not_an_exception(db_url, monkeypatch, error):
    import duckdb

    import warehouse.db
    from warehouse.errors import DiskError

    def full(*args, **kwargs):
        if error == "duckdb":
            raise duckdb.IOException('Could not write file "/data/wh.duckdb.wal": No space left on device')
        raise DiskError("no space left on the device for wh.duckdb")

    said = []
    life = RunLife(db_url, "train run", every_s=3600, log=said.append)
    monkeypatch.setattr(warehouse.db, "connect", full)
    life.start("full_disk")
    life.end(None)
    # the start waits for the first beat that gets in, silently; the end's loss is one line
    assert len(said) == 1 and "the end of run full_disk was not recorded" in said[0] and "space" in said[0], said


def rows_of(db_url: str, run_id: str) -> tuple[int, int]:
    with connect(db_url, read_only=True) as con:
        return tuple(con.execute(f'SELECT count(*) FROM "{table}" WHERE "run_id" = ?', [run_id]).fetchone()[0]
                     for table in ("runs", "run_lifecycle"))


def test_a_launch_that_fails_before_round_1_leaves_no_run(db_url, model_dir, monkeypatch):
    """A mistyped --model fails after the run row was claimed: the launch is no run, and says so;
    a failure once round 1 has begun keeps the run, failed (test_train_run_records_its_life)."""
    import train.run
    from warehouse.errors import TerminalError

    lines = []
    opts = RunOptions(model=str(model_dir.parent / "no-such-model"), rounds=1, tasks=(TASK,), db_url=db_url,
                      learn=False, run_id="typo")
    with pytest.raises(TerminalError):
        train.run.run(opts, log=lines.append)
    assert rows_of(db_url, "typo") == (0, 0)
    assert any(line.startswith("Run typo stopped before round 1 (") and "leaves no row" in line for line in lines)
    # the id is free again: the corrected launch takes it
    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer))
    train.run.run(RunOptions(**{**opts.__dict__, "model": str(model_dir),
                                "sets": {"siblings_per_expansion": "2"}}), log=lambda line: None)
    assert rows_of(db_url, "typo") == (1, 1) and state(db_url, "typo")["state"] == "finished"


def test_only_train_run_launches_are_forgotten_before_round_1(db_url):
    with pytest.raises(KeyboardInterrupt), recording(db_url, "train run", every_s=3600, log=lambda line: None) as life:
        life.start("early")
        raise KeyboardInterrupt
    assert state(db_url, "early") == {}
    with pytest.raises(ValueError), recording(db_url, "train rm", every_s=3600) as life:
        life.start("rm_early")  # train rm has no rounds: its failures stay on record
        raise ValueError("bad pairs")
    assert state(db_url, "rm_early")["state"] == "failed"
