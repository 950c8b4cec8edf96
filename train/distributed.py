"""`train run` on several processes: torchrun's ranks, the messages rank 0 sends, the launcher.

Under torchrun (WORLD_SIZE > 1) every rank holds an FSDP shard of the policy for the update
and an unsharded copy for generation: each rank generates its share of every generation call
(train.generate.ranks); rank 0 alone executes, writes the warehouse and checks the gates. The
ranks meet at share points, where rank 0 broadcasts one message: a generation call, the
round's learner samples, or STOP with its exit status when it failed on its own (gen, a
write, the health gate, Ctrl-C). Every other rank then leaves with that status instead of waiting in a
collective forever. A rank-0 failure inside a collective (the update itself) cannot be
announced; torchrun's agent then ends the other ranks.

Launch: `torchrun --standalone --nproc-per-node N $(which train) run ...`, or
`train run --nproc N ...` (train.launch). This module only knows the ranks: it never imports
the loop (train.run imports it).
"""
from __future__ import annotations

import contextlib
import os
import sys
import socket
from dataclasses import dataclass, field

from warehouse.errors import WarehouseError

INTERRUPTED = 130  # the shell's status for Ctrl-C


@dataclass(frozen=True)
class Stop:
    """Rank 0 failed on its own: every rank exits with `status`, after rank 0 (`host`, `pid`)."""

    status: int
    host: str = field(default_factory=socket.gethostname, compare=False)
    pid: int = field(default_factory=os.getpid, compare=False)


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
    sharded: bool = False  # launched by torchrun (any size, 1 too): FSDP update, a generation copy per rank
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
                raise Stopped(box[0])
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

    def generation_done(self) -> None:
        """Rank 0 has generated the round: the other ranks leave :meth:`serve_generation`."""
        from train.generate.ranks import end_generation

        end_generation(self)

    def serve_generation(self, backend) -> None:
        """A rank other than 0 during `gen`: generate its share of each of rank 0's generation
        calls on `backend` until rank 0 has generated the round (train.generate.ranks)."""
        from train.generate.ranks import serve_generation

        serve_generation(self, backend)

    def finish(self) -> None:
        """The last share point: rank 0 is done (a rank that is not leaves with STOP)."""
        if self.size > 1:
            self.share(DONE)


class Stopped(SystemExit):
    """This rank leaves because rank 0 sent `stop`; its exit status is rank 0's."""

    def __init__(self, stop: Stop):
        super().__init__(stop.status)
        self.stop = stop


def outlive_rank_0(stop: Stop, timeout_s: float = 60.0) -> None:
    """Wait (on rank 0's host) until rank 0's process has exited, before this rank's does.
    torch's launcher ends the run at the first rank it sees exit non-zero and kills the rest: a
    rank that left first was reported in rank 0's place, and rank 0 was killed while it recorded
    how its run ended. Only a process's last step: rank 0 may hold no collective after STOP."""
    import time

    import psutil

    if stop.host != socket.gethostname():
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(stop.pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)


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
