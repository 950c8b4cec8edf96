"""A run's state row (table `run_lifecycle`): the record API a trainer's start, heartbeat and end
write through.

One name for a run's life in every layer: `train.run_state` records it, `ingest.run_state`
writes its row (table `run_lifecycle`), the `run_state` view (sql/run_state.sql) derives its
state, and `warehouse.run_state` reads that for the pages.

`train.run_state` records when a run started, beats while it lives and records how it ended;
these are those writes, one function each. Like the rest of the record API nothing here opens
or commits a transaction: the caller wraps each write in `warehouse.db.transaction` (on
DuckLake it redoes a commit that lost to another writer's)::

    from ingest.run_state import RunStart, record_end, record_heartbeat, record_start
    from warehouse.db import connect, transaction

    start = RunStart(run_id="20261129_081500_mini", trainer="train run", started_at=now,
                     heartbeat_every_s=30.0, host="gpu-07", pid=4242)
    with connect("duckdb:///warehouse.duckdb") as con:
        transaction(con, lambda: record_start(con, start))
        transaction(con, lambda: record_heartbeat(con, start, later))
        transaction(con, lambda: record_end(con, start, last, "finished", "completed"))

A lifecycle row is the trainer's own state, not a file's content: it has no `sources` row;
`warehouse export` writes the table and ingesting the export restores it. Times are UTC
without a zone, as the table keeps them.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["RunStart", "record_start", "record_heartbeat", "record_end"]


@dataclass(frozen=True)
class RunStart:
    """What a run's row records when it starts."""

    run_id: str
    trainer: str  # "train run" or "train rm"
    started_at: datetime
    heartbeat_every_s: float
    host: str
    pid: int


def record_start(con, start: RunStart) -> None:
    """Write the run's row, started and beaten at `started_at`; a row this run id had is
    replaced (a rerun of a run id restarts it)."""
    # delete, then insert, rather than INSERT OR REPLACE: DuckLake has no primary keys
    con.execute('DELETE FROM "run_lifecycle" WHERE "run_id" = ?', [start.run_id])
    con.execute('INSERT INTO "run_lifecycle" ("run_id", "trainer", "started_at", "heartbeat_at", '
                '"heartbeat_every_s", "host", "pid") VALUES (?, ?, ?, ?, ?, ?, ?)',
                [start.run_id, start.trainer, start.started_at, start.started_at, start.heartbeat_every_s,
                 start.host, start.pid])


def record_heartbeat(con, start: RunStart, at: datetime) -> None:
    """Move the heartbeat of a run that has not ended to `at`. A run without a row gets its
    start recorded first: the start may not have got past a lock, and the first beat that gets
    in records it."""
    if not con.execute('SELECT count(*) FROM "run_lifecycle" WHERE "run_id" = ?', [start.run_id]).fetchone()[0]:
        record_start(con, start)
    con.execute('UPDATE "run_lifecycle" SET "heartbeat_at" = ? WHERE "run_id" = ? AND "ended_at" IS NULL',
                [at, start.run_id])


def record_end(con, start: RunStart, at: datetime, end_status: str, exit_reason: str) -> None:
    """The last beat and the end: `end_status` finished, failed or stopped, with its reason."""
    record_heartbeat(con, start, at)  # the row exists (recorded now if no beat got in)
    con.execute('UPDATE "run_lifecycle" SET "ended_at" = ?, "end_status" = ?, "exit_reason" = ? WHERE "run_id" = ?',
                [at, end_status, exit_reason, start.run_id])


def forget_unstarted_run(con, run_id: str) -> None:
    """Remove what a `train run` launch wrote before its first round (its lifecycle row, and
    its run row when no round of it landed): a launch refused before round 1 is no run."""
    con.execute('DELETE FROM "run_lifecycle" WHERE "run_id" = ?', [run_id])
    con.execute('DELETE FROM "runs" WHERE "run_id" = ? AND NOT EXISTS '
                '(SELECT 1 FROM "nodes" WHERE "run_id" = ?)', [run_id, run_id])
