"""`train run --nproc N`: N local ranks through torch.distributed's launcher API (elastic_launch),
as `torchrun --standalone --nproc-per-node N` starts them, each running :func:`train.run.run`.

The ranks' side (the process group, share points, STOP) is :mod:`train.distributed`; this
module sits above both it and the loop, so neither imports the other's caller.
"""
from __future__ import annotations

import contextlib
import os
import sys
import traceback

import train.run as loop
from train.distributed import Stopped, exit_status, launched_world, outlive_rank_0
from warehouse.errors import TerminalError, WarehouseError


class LaunchError(TerminalError):
    """A rank of a multi-process run failed."""


def launch(nproc: int, opts, rank_setup=None):
    """Run `train.run.run(opts)` on `nproc` local ranks through torch's elastic launcher (what
    `torchrun --standalone --nproc-per-node N` does); returns rank 0's RunReport, raises
    LaunchError when a rank fails.

    The ranks are fresh processes (spawned) that share no state with the caller:
    `rank_setup`, a picklable function of no arguments, runs first in each rank, as
    multiprocessing.Pool's initializer does (a notebook's logging set-up, a test's patches)."""
    import uuid

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if nproc < 1:
        raise TerminalError(f"--nproc {nproc}: expected 1 or more processes")
    # spawn: each rank a fresh interpreter, as torchrun starts them. Never a fork of the caller:
    # a forked child cannot use CUDA, and once the caller has computed with torch on the CPU
    # (OpenMP's threads started) a forked child's first parallel op crashes or hangs (rank 0
    # dies of SIGSEGV in its first forward, or waits forever). A fork
    # server forks safely, but its ranks write to the streams it was started with.
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=str(uuid.uuid4()),
                          rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=0,
                          monitor_interval=0.2, start_method="spawn")
    try:
        with _one_thread_per_rank(), _quiet_launcher():
            return elastic_launch(config, _rank_main)(opts, rank_setup)[0]
    except ChildFailedError as exc:
        statuses = {rank: f.exitcode for rank, f in sorted(exc.failures.items())}
        raise LaunchError(f"{len(statuses)} of {nproc} ranks failed (exit status by rank: {statuses}); "
                          "each failed rank's error is printed above") from None


@contextlib.contextmanager
def _quiet_launcher():
    """torch's launcher logs each failed rank's traceback; rank 0 prints its own one-line
    error and LaunchError names the statuses, so keep those logs out of the way."""
    import logging

    loggers = [logging.getLogger(name) for name in ("torch.distributed.elastic", "torch.multiprocessing")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


@contextlib.contextmanager
def _one_thread_per_rank():
    """OMP_NUM_THREADS=1 for the ranks unless set, as torchrun does for several processes
    (CPU ranks otherwise oversubscribe the cores); the caller's environment is restored."""
    before = os.environ.get("OMP_NUM_THREADS")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("OMP_NUM_THREADS", None)


def _rank_main(opts, rank_setup=None):
    """One rank's work under `launch`: the run, with rank 0's known errors as one line."""
    # a rank writes to its process's own streams, not to a stream the launching caller had
    # swapped in (click's test runner, a notebook)
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    try:
        if rank_setup is not None:
            rank_setup()
        return loop.run(opts, log=_echo)
    except Stopped as exc:  # rank 0 stopped the run: leave after it, so the launcher reports rank 0
        outlive_rank_0(exc.stop)
        raise
    except WarehouseError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        raise SystemExit(exit_status(exc)) from None
    except Exception:  # a bug, not a known error: the launcher's own logging is quieted
        rank = launched_world()[0]
        print(f"Rank {rank} failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
        raise


def _echo(line: str) -> None:
    print(line, flush=True)
