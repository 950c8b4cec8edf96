"""A run's state in the warehouse: started, a heartbeat while it lives, ended with a status.

One name for a run's life in every layer: `train.run_state` records it, `ingest.run_state`
writes its row (table `run_lifecycle`), the `run_state` view (sql/run_state.sql) derives its
state, and `warehouse.run_state` reads that for the pages.

Both trainers (`train run`, `train rm`) wrap their loop in :func:`recording`: the run's
`run_lifecycle` row is written when the run id is known, a daemon thread beats it every
`every_s` seconds, and on the way out the end is recorded as `finished` (the loop returned),
`stopped` (KeyboardInterrupt, SystemExit: Ctrl-C or a SIGTERM turned into an exit) or `failed`
(any other exception, its type and first line kept as exit_reason). A process that dies unseen
(SIGKILL, OOM, a lost machine) records nothing more: the `run_state` view calls it `lost` once
its beats stop.

The row goes through the record API (:mod:`ingest.run_state`), each write in one
`warehouse.db.transaction`. Beats are best effort: each opens a write connection for one beat
and waits at most `BEAT_WAIT_S` for the lock (a reader or a round's commit may hold it); a
missed beat is simply tried again next time, and run_state allows several to be missed. The
start waits as briefly (the first beat that gets in records it); the end waits up to
`END_WAIT_S`, since without it the run would read as lost.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import socket
import threading
from datetime import datetime, timezone
from pathlib import Path

from ingest.run_state import RunStart, forget_unstarted_run, record_end, record_heartbeat, record_start
from warehouse import vocabulary as vocab
from warehouse.errors import DatabaseLockedError

HEARTBEAT_S = 30.0
BEAT_WAIT_S = 2.0
END_WAIT_S = 15.0  # a locked warehouse delays the trainer's exit by at most this

# Beat threads still running when the interpreter exits (a RunLife never ended: a caller that
# raised before `end`). A daemon thread inside DuckDB's C++ code at exit is torn down under it,
# and the process dies with SIGABRT (std::terminate; Ray's handler prints it) instead of its
# exit code. `_stop_beating_at_exit` stops and joins them first.
_BEATING: set["RunLife"] = set()
_BEATING_LOCK = threading.Lock()


def checkpoint_settings(opts) -> dict:
    """Where the run saves its checkpoints (runs.overrides), so the dashboard can list them:
    `<checkpoint_dir>/<run_id>/global_step_<N>` for every step whose timing row saved."""
    if not getattr(opts, "checkpoint_root", None):
        return {}
    return {"checkpoint_dir": str(Path(opts.checkpoint_root).resolve()), "checkpoint_every": opts.checkpoint_every}


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def end_of(exc: BaseException | None) -> tuple[str, str]:
    """(end_status, exit_reason) for the exception a run ended on (None: it returned)."""
    if exc is None:
        return vocab.FINISHED, "completed"
    if isinstance(exc, KeyboardInterrupt):
        return vocab.STOPPED_RUN, "KeyboardInterrupt"
    if isinstance(exc, SystemExit):
        return vocab.STOPPED_RUN, f"SystemExit({exc.code})"
    first = (str(exc).strip().splitlines() or [""])[0][:500]
    return vocab.FAILED, f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class RunLife:
    """The lifecycle row of one run; nothing is written until :meth:`start`."""

    def __init__(self, db_url: str | None, trainer: str, every_s: float = HEARTBEAT_S, log=print):
        self.db_url = db_url
        self.trainer = trainer
        self.every_s = every_s
        self.log = log
        self.run_id: str | None = None
        self.started_at: datetime | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.in_rounds = False  # `train run`: a launch that fails before round 1 leaves no row

    def start(self, run_id: str) -> None:
        """Record the start (replacing a row this id had: a rerun of a run id restarts it) and
        begin beating."""
        if self.db_url is None or self.run_id is not None:
            return
        self.run_id = run_id
        self.started_at = utc_now()
        # a short wait: when the warehouse is locked, the first beat that gets in records it
        self._write(lambda con: record_start(con, self.recorded_start()), BEAT_WAIT_S, None)
        self._thread = threading.Thread(target=self._beat_loop, name=f"heartbeat {run_id}", daemon=True)
        with _BEATING_LOCK:
            _BEATING.add(self)
        self._thread.start()

    def beat(self) -> bool:
        """One heartbeat now (recording the start too when it could not get in); False when the
        warehouse stayed locked (tried again next time)."""
        now = utc_now()
        return self._write(lambda con: record_heartbeat(con, self.recorded_start(), now), BEAT_WAIT_S, None)

    def round_started(self) -> None:
        """The run has begun round 1: from now on it is a run, however it ends."""
        self.in_rounds = True

    def end(self, exc: BaseException | None = None) -> None:
        """Stop beating and record how the run ended; a `train run` launch that failed or was
        stopped before round 1 (a bad --model, a refused resume) is removed instead, with a line
        that says why, so it does not crowd the runs page and the compare tables."""
        if self.run_id is None:
            return
        self._stop_beating()
        status, reason = end_of(exc)
        now = utc_now()
        if exc is not None and not self.in_rounds and self.trainer == "train run":
            if self._write(lambda con: forget_unstarted_run(con, self.run_id), END_WAIT_S, "end"):
                self.log(f"Run {self.run_id} stopped before round 1 ({reason}): it leaves no row in the warehouse.")
        else:
            self._write(lambda con: record_end(con, self.recorded_start(), now, status, reason), END_WAIT_S, "end")
        self.run_id = None

    def recorded_start(self) -> RunStart:
        """What the run's row records of its start (this process, this host)."""
        return RunStart(run_id=self.run_id, trainer=self.trainer, started_at=self.started_at,
                        heartbeat_every_s=self.every_s, host=socket.gethostname(), pid=os.getpid())

    def _stop_beating(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=BEAT_WAIT_S + 5)
        with _BEATING_LOCK:
            _BEATING.discard(self)

    def _beat_loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.beat()
            except Exception as exc:  # noqa: BLE001 - a broken beat must not kill a training run
                self.log(f"Warning: heartbeats of run {self.run_id} stopped ({type(exc).__name__}: {exc}).")
                return

    def _write(self, work, wait_s: float, what: str | None) -> bool:
        from warehouse.db import connect, transaction

        try:
            with connect(self.db_url, wait_s=wait_s) as con:
                transaction(con, lambda: work(con), wait_s=wait_s)
            return True
        except Exception as exc:
            from warehouse.errors import DiskError, disk_errno

            # a locked warehouse, or one whose disk is full or read-only (the rounds are spooled
            # then, and the run's exit names their load command): the run goes on
            if not isinstance(exc, (DatabaseLockedError, DiskError)) and disk_errno(exc) is None:
                raise
            if what is not None:  # a missed beat says nothing; a missed start or end is worth a line
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                self.log(f"Warning: the {what} of run {self.run_id} was not recorded ({first}).")
            return False


@atexit.register
def _stop_beating_at_exit() -> None:
    with _BEATING_LOCK:
        lives = list(_BEATING)
    for life in lives:
        life._stop_beating()


@contextlib.contextmanager
def recording(db_url: str | None, trainer: str, log=print, every_s: float = HEARTBEAT_S):
    """A RunLife for the block: call `.start(run_id)` once the id is known; the end is recorded
    on the way out, with the exception (if any) re-raised untouched."""
    life = RunLife(db_url, trainer, every_s=every_s, log=log)
    try:
        yield life
    except BaseException as exc:
        life.end(exc)
        raise
    life.end(None)
