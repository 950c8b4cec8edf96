"""Data-parallel generation under torchrun: every rank generates a share of each generation call.

Rank 0 runs the round (train.rollout.round) as one process does; its backend is a
`DealtBackend`. At each call (one expansion index: a sibling group per task) it
1. broadcasts the call (requests and sampling settings) to every rank,
2. generates its own share on its own backend while every other rank, waiting in
   `serve_generation`, generates its share on its own copy of the policy,
3. gathers the shares, and returns the whole call's completions to the round, which executes
   them on rank 0's executor before it plans the next expansion index (an improve or debug
   expansion may pick a parent made by the one before it, so calls cannot run ahead).
Shares are whole requests (sibling groups), dealt round-robin. Each row keeps the noise index it
has in the whole call (`HFBackend.generate(indices=...)`), so a request's tokens depend only on
its seed and its rows, never on the rank that generated it or the rows beside it: the round is,
node by node, the round of one process. With fewer requests than ranks some ranks idle.

Execution does not overlap generation: the round executes a call's completions after the
gather (see the README's "Several GPUs" for why).

Failures: a rank whose share fails (out of GPU memory, a bug) sends its error, named by its rank,
in place of its share; rank 0 raises it inside its own `gen` phase (train.device_errors.GuardedTimer makes
a device error one line), and rank 0's STOP (train.distributed.Team.alone) reaches the ranks
waiting for the next call. Rank 0's own failure waits until the gather is over, so no rank is
left inside a collective. The objects exchanged are plain Python (token ids and logprobs are
lists), pickled by torch.distributed's object collectives over the run's process group.
"""
from __future__ import annotations

import pickle
import sys
import traceback
from dataclasses import dataclass

from train.generate.base import Capabilities


@dataclass(frozen=True)
class Call:
    """One generation call of rank 0's round, sent to every rank."""

    requests: list
    sampling: object


@dataclass(frozen=True)
class _Generated:
    """Rank 0 has generated the whole round: the ranks leave `serve_generation`."""


GENERATED = _Generated()


@dataclass
class Share:
    """What one rank sends back for a call: its requests' completions, or its error."""

    rank: int
    indices: list
    completions: list | None = None
    error: BaseException | None = None
    trace: str = ""  # the failed rank's traceback, kept as the cause of the error rank 0 raises


class RankTraceback(Exception):
    """The traceback of a failure on another rank (the cause of the error rank 0 raises)."""


def share_of(n_requests: int, rank: int, size: int) -> list[int]:
    """The requests (indices into the call) this rank generates: round-robin."""
    return list(range(rank, n_requests, size))


class DealtBackend:
    """Rank 0's backend with several ranks: each call is dealt over every rank (module docstring).

    Its capabilities: the dealt backend's logprobs; no streaming (a call returns after the
    gather), no share of its own (it is the dealer), no adapter swap (each rank's generation
    copy is loaded by the FSDP sync, train.weight_sync)."""

    def __init__(self, team, backend, log=None):
        self.team, self.backend = team, backend
        self.log = log  # callable(str) or None: each call's rows per rank (the deal's balance)
        self.capabilities = Capabilities(logprobs=backend.capabilities.logprobs)
        self.notes: list[str] = []
        self.device = None  # every rank generates on its own device

    def generate(self, requests, sampling) -> list[list]:
        call = Call(list(requests), sampling)
        self.team.share(call)
        held = None
        try:
            own = generate_share(self.team.rank, self.team.size, self.backend, call)
        except Exception as exc:  # noqa: BLE001 - raised after the gather: the other ranks are in it
            own, held = Share(self.team.rank, []), exc
        shares = _gather(self.team, own)
        if held is not None:
            raise held
        return self._assemble(shares, len(requests))

    def _assemble(self, shares: list, n_requests: int) -> list[list]:
        """The whole call's completions in request order; a rank's error is raised here."""
        for share in shares:
            if share.error is not None:
                share.error.__cause__ = RankTraceback(share.trace)
                raise share.error
        out = [None] * n_requests
        for share in shares:
            for index, completions in zip(share.indices, share.completions):
                out[index] = completions
        if self.log is not None:
            rows = ", ".join(str(sum(map(len, share.completions))) for share in shares)
            self.log(f"  generation dealt over {len(shares)} ranks: {rows} rows")
        return out


def generate_share(rank: int, size: int, backend, call: Call) -> Share:
    """This rank's requests of `call`, generated with the noise they have in the whole call."""
    indices = share_of(len(call.requests), rank, size)
    completions = backend.generate(call.requests, call.sampling, indices=indices) if indices else []
    return Share(rank, indices, completions)


def serve_generation(team, backend) -> None:
    """A rank other than 0 during `gen`: generate its share of each of rank 0's calls until rank 0
    has generated the round. A STOP from rank 0 ends this process (Team.share)."""
    while True:
        message = team.share(None)
        if isinstance(message, _Generated):
            return
        if not isinstance(message, Call):
            raise RuntimeError(f"rank {team.rank}: expected a generation call from rank 0, got {message!r}")
        try:
            share = generate_share(team.rank, team.size, backend, message)
        except Exception as exc:  # noqa: BLE001 - rank 0 raises it; its STOP then ends this rank
            print(f"Rank {team.rank}: generation failed ({type(exc).__name__}); rank 0 reports it.",
                  file=sys.stderr, flush=True)
            share = Share(team.rank, [], error=_portable(exc, team.rank), trace=traceback.format_exc())
        _gather(team, share)


def end_generation(team) -> None:
    """Rank 0: the round is generated; the other ranks leave `serve_generation`."""
    if team.size > 1:
        team.share(GENERATED)


def _gather(team, share: Share) -> list | None:
    """Every rank's share on rank 0 (None elsewhere)."""
    import torch.distributed as dist

    shares = [None] * team.size if team.main else None
    dist.gather_object(share, shares, dst=0)
    return shares


def _portable(exc: Exception, rank: int) -> Exception:
    """A copy of `exc` that survives pickling, its message prefixed with the rank, so rank 0
    raises the same kind of error (an out-of-memory error stays one, for GuardedTimer's line)."""
    try:
        copy = pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - any exception that does not pickle
        copy = RuntimeError(f"{type(exc).__name__}: {exc}")
    if copy.args and isinstance(copy.args[0], str):
        copy.args = (f"rank {rank}: {copy.args[0]}", *copy.args[1:])
    else:
        copy = RuntimeError(f"rank {rank}: {type(exc).__name__}: {exc}")
    return copy
