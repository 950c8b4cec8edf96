"""Generation dealt over torchrun's ranks (train.generate.ranks), 2 spawned gloo processes and a
fake backend: each call's requests come back in order, each rank generates its share, and a
failure on either rank becomes rank 0's error (one line for an out-of-memory error) while every
rank leaves with rank 0's status instead of waiting in a collective."""
from __future__ import annotations

import json
import multiprocessing
import os
import sys

import pytest

from train.distributed import Team, exit_status
from train.generate.base import Capabilities, GenRequest
from train.generate.ranks import DealtBackend, end_generation, serve_generation, share_of
from warehouse.arms import get_arm


class FakeBackend:
    """Names each completion after its request, row and the rank that made it; `fail` raises
    at that call (1-based)."""

    capabilities = Capabilities(ranks=True)

    def __init__(self, rank: int, fail: int = 0, error: Exception | None = None):
        self.rank, self.fail, self.error, self.calls = rank, fail, error, 0

    def generate(self, requests, sampling, indices=None):
        self.calls += 1
        if self.calls == self.fail:
            raise self.error
        return [[f"{requests[i].messages}:{row}@{self.rank}" for row in range(requests[i].n)] for i in indices]


CALLS = [[GenRequest(f"r{i}", 2) for i in range(3)], [GenRequest("only", 1)]]  # rank 1 idles in call 2


def _member(rank: int, init_file: str, out: str, fail_rank: int, error) -> None:
    import torch.distributed as dist

    from train.device_errors import GuardedTimer

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    team = Team(rank=rank, size=2)
    backend = FakeBackend(rank, fail=1 if rank == fail_rank else 0, error=error)
    said, status = [], 0
    try:
        with team.alone(), GuardedTimer(get_arm("hr24k_u6"), 3).phase("gen"):
            if team.main:
                dealt = DealtBackend(team, backend, log=said.append)
                got = [dealt.generate(requests, None) for requests in CALLS]
                end_generation(team)
            else:
                serve_generation(team, backend)
        team.finish()
    except BaseException as exc:  # noqa: BLE001 - the status and message are what the test reads
        status, got = exit_status(exc), str(exc)
    if team.main:
        with open(out, "w") as f:
            json.dump({"got": got, "said": said}, f)
    dist.barrier()  # no rank tears gloo down while the other still has a collective in flight
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # no interpreter finalization with gloo's objects alive (test_learn_fsdp.py)


def _run_pair(tmp_path, fail_rank: int = -1, error=None) -> tuple[list, dict]:
    # fresh processes, not forks of pytest's (whose OpenMP threads a fork breaks)
    spawn = multiprocessing.get_context("spawn")
    out = tmp_path / "rank0.json"
    members = [spawn.Process(target=_member, args=(rank, str(tmp_path / "init"), str(out), fail_rank, error))
               for rank in (0, 1)]
    for member in members:
        member.start()
    for member in members:
        member.join(50)
    hung = [m for m in members if m.is_alive()]
    for member in hung:
        member.kill()
    assert not hung
    return [m.exitcode for m in members], json.loads(out.read_text())


@pytest.mark.timeout(60)
def test_each_rank_generates_its_share_and_rank_0_gets_the_call_in_request_order(tmp_path):
    statuses, seen = _run_pair(tmp_path)
    assert statuses == [0, 0]
    assert seen["got"] == [[["r0:0@0", "r0:1@0"], ["r1:0@1", "r1:1@1"], ["r2:0@0", "r2:1@0"]], [["only:0@0"]]]
    assert seen["said"] == ["  generation dealt over 2 ranks: 4, 2 rows", "  generation dealt over 2 ranks: 1, 0 rows"]


@pytest.mark.timeout(60)
def test_rank_1_out_of_memory_is_rank_0s_one_line_gen_error_and_both_ranks_leave(tmp_path):
    import torch

    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    statuses, seen = _run_pair(tmp_path, fail_rank=1, error=oom)
    assert statuses == [1, 1]
    assert seen["got"].startswith("round 3, phase gen: out of GPU memory (rank 1: CUDA out of memory. Tried to "
                                  "allocate 2.00 GiB); lower --set gpu_memory_utilization")


@pytest.mark.timeout(60)
def test_rank_0s_own_failure_waits_for_the_gather_then_stops_every_rank(tmp_path):
    statuses, seen = _run_pair(tmp_path, fail_rank=0, error=ValueError("bad share"))
    assert statuses == [1, 1] and seen["got"] == "bad share"


def test_shares_are_whole_requests_dealt_round_robin():
    assert [share_of(5, rank, 2) for rank in (0, 1)] == [[0, 2, 4], [1, 3]]
    assert [share_of(1, rank, 3) for rank in (0, 1, 2)] == [[0], [], []]
