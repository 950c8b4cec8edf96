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
from train.distributed import Stopped, exit_status, launched_world, outlive_rank_0, wants_cuda
from warehouse.errors import TerminalError, WarehouseError


class LaunchError(TerminalError):
    """A rank of a multi-process run failed."""


def launch(nproc: int, opts):
    """Run `train.run.run(opts)` on `nproc` local ranks through torch's elastic launcher (what
    `torchrun --standalone --nproc-per-node N` does); returns rank 0's RunReport, raises
    LaunchError when a rank fails."""
    import uuid

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if nproc < 1:
        raise TerminalError(f"--nproc {nproc}: expected 1 or more processes")
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=str(uuid.uuid4()),
                          rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=0,
                          monitor_interval=0.2, start_method=_start_method(opts.device))
    try:
        with _one_thread_per_rank(), _quiet_launcher():
            return elastic_launch(config, _rank_main)(opts)[0]
    except ChildFailedError as exc:
        statuses = {rank: f.exitcode for rank, f in sorted(exc.failures.items())}
        raise LaunchError(f"{len(statuses)} of {nproc} ranks failed (exit status by rank: {statuses}); "
                          "each failed rank's error is printed above") from None


def _start_method(device: str) -> str:
    """spawn for CUDA (a forked child cannot use CUDA); fork on CPU, where the ranks then
    share the imports already made (torch, transformers: most of a CPU rank's start-up)."""
    return "spawn" if wants_cuda(device) else "fork"


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


def _rank_main(opts):
    """One rank's work under `launch`: the run, with rank 0's known errors as one line."""
    # a forked rank writes to its process's own streams, not to a stream the launching
    # caller had swapped in (click's test runner, a notebook)
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    try:
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
