"""`train run` on several processes: torchrun's ranks, the messages rank 0 sends, the launcher.

Under torchrun (WORLD_SIZE > 1) every rank holds an FSDP shard of the policy for the update;
rank 0 alone generates (on its own unsharded copy), executes, writes the warehouse and checks
the gates. The ranks meet at share points, where rank 0 broadcasts one message: the round's
learner samples, or STOP with its exit status when it failed on its own (gen, a write, the
health gate, Ctrl-C). Every other rank then leaves with that status instead of waiting in a
collective forever. A rank-0 failure inside a collective (the update itself) cannot be
announced; torchrun's agent then ends the other ranks.

Launch: `torchrun --standalone --nproc-per-node N $(which train) run ...`, or
`train run --nproc N ...`, which starts the same agent through torch.distributed's
launcher API (elastic_launch) with `run` as the workers' function.
"""
from __future__ import annotations

import contextlib
import os
import sys
import traceback
from dataclasses import dataclass

from warehouse.errors import TerminalError, WarehouseError

INTERRUPTED = 130  # the shell's status for Ctrl-C


class LaunchError(TerminalError):
    """A rank of a multi-process run failed."""


@dataclass(frozen=True)
class Stop:
    """Rank 0 failed on its own: every rank exits with `status`."""

    status: int


@dataclass(frozen=True)
class _Done:
    """Rank 0 finished the run."""


DONE = _Done()


def launched_world() -> tuple[int, int, int]:
    """(rank, world size, local rank) as torchrun set them; (0, 1, 0) for a plain process."""
    env = os.environ
    return int(env.get("RANK", 0)), int(env.get("WORLD_SIZE", 1)), int(env.get("LOCAL_RANK", 0))


@dataclass
class Team:
    """This process's place among the run's ranks. One rank: every call is a no-op."""

    rank: int = 0
    size: int = 1
    device: str = "auto"
    sharded: bool = False  # launched by torchrun (any size, 1 too): FSDP update, rank 0's generation copy
    _announced: bool = False

    @property
    def main(self) -> bool:
        return self.rank == 0

    def share(self, message=None):
        """Rank 0's `message` on every rank; a STOP from rank 0 ends this rank with its status."""
        if self.size == 1:
            return message
        import torch.distributed as dist

        box = [message if self.main else None]
        dist.broadcast_object_list(box, src=0)
        if isinstance(box[0], Stop):
            if not self.main:
                print(f"Rank {self.rank}: rank 0 stopped the run (exit {box[0].status}); stopping too.",
                      file=sys.stderr)
            # every rank has read the STOP before rank 0 exits (its exit makes torchrun end the rest)
            dist.barrier()
            if not self.main:
                raise SystemExit(box[0].status)
        return box[0]

    @contextlib.contextmanager
    def alone(self):
        """Rank 0's work outside collectives (the others wait at the next share point): a
        failure here sends them STOP before it propagates."""
        try:
            yield
        except BaseException as exc:
            if self.size > 1 and self.main and not self._announced:
                self._announced = True
                self.share(Stop(exit_status(exc)))
            raise

    def finish(self) -> None:
        """The last share point: rank 0 is done (a rank that is not leaves with STOP)."""
        if self.size > 1:
            self.share(DONE)


def exit_status(exc: BaseException) -> int:
    """The status this exception gives the process: Ctrl-C 130, SystemExit its code, else 1."""
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED
    if isinstance(exc, SystemExit):
        return exc.code if isinstance(exc.code, int) else 1
    return getattr(exc, "exit_code", 1) if isinstance(exc, WarehouseError) else 1


def wants_cuda(device: str) -> bool:
    """--device cuda[:N], or auto on a machine with a GPU."""
    import torch

    return device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())


def under_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def join_team(device: str) -> Team:
    """Under torchrun, join the process group (nccl on cuda, each rank on cuda:LOCAL_RANK;
    gloo on cpu), also for one process (`torchrun --nproc-per-node 1` runs the same path as
    N: a one-GPU smoke of it); otherwise the plain one-process team."""
    rank, size, local_rank = launched_world()
    if not under_torchrun():
        return Team(device=device)
    import torch
    import torch.distributed as dist

    cuda = wants_cuda(device)
    if cuda:
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    else:
        device = "cpu"
    if not dist.is_initialized():
        if cuda:  # the device named up front: NCCL need not guess rank -> GPU
            dist.init_process_group("nccl", device_id=torch.device(device))
        else:
            dist.init_process_group("gloo")
    return Team(rank=rank, size=size, device=device, sharded=True)


def leave_team(team: Team) -> None:
    if team.sharded:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


# --- the launcher behind `train run --nproc N` -----------------------------------------

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
    from train.run import run

    # a forked rank writes to its process's own streams, not to a stream the launching
    # caller had swapped in (click's test runner, a notebook)
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    try:
        return run(opts, log=_echo)
    except WarehouseError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        raise SystemExit(exit_status(exc)) from None
    except Exception:  # a bug, not a known error: the launcher's own logging is quieted
        rank = launched_world()[0]
        print(f"Rank {rank} failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
        raise


def _echo(line: str) -> None:
    print(line, flush=True)
