"""Device errors as one line: an out-of-memory or CUDA error inside a phase of the loop names the
round, the phase and the setting to change, and says that nothing of the round was written.

The phases are the seeds' (gen, old_log_prob, ref, adv, update_actor, update_weights,
save_checkpoint); :class:`GuardedTimer` times them (train.learn.timing) and turns a device
error inside one into that line. Both trainers' CLIs print it through the one error boundary.
"""
from __future__ import annotations

import contextlib

from warehouse.arms import Arm
from warehouse.errors import TerminalError

ADVICE = {
    "gen": "lower --set gpu_memory_utilization=... (the KV pool's share of the GPU, now {util}) or "
           "--set response_cap=... (now {response_cap})",
    "old_log_prob": "lower --set response_cap=... (now {response_cap}; a micro-batch holds total_cap = {total_cap} tokens)",
    "ref": "lower --set response_cap=... (now {response_cap}; a micro-batch holds total_cap = {total_cap} tokens)",
    "adv": "lower --set response_cap=... (now {response_cap})",
    "update_actor": "lower --set response_cap=... (now {response_cap}; a micro-batch holds total_cap = {total_cap} "
                    "tokens, with activations for the backward pass)",
    "update_weights": "lower --set gpu_memory_utilization=... (now {util}; the generator's share of the GPU)",
    "save_checkpoint": "free GPU memory held by other processes, or lower --set gpu_memory_utilization=... (now {util})",
}


def is_device_error(exc: BaseException) -> bool:
    """Out of GPU memory, or an error raised by CUDA / its libraries."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    accelerator = getattr(torch, "AcceleratorError", ())
    if accelerator and isinstance(exc, accelerator):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(k in text for k in ("CUDA", "CUBLAS", "cuDNN", "NCCL", "out of memory"))


def device_error_line(phase: str, exc: BaseException, arm: Arm, round_no: int) -> str:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    kind = "out of GPU memory" if "out of memory" in str(exc).lower() else type(exc).__name__
    advice = ADVICE.get(phase, "see the message").format(util=arm.gpu_memory_utilization or 0.6,
                                                         response_cap=arm.response_cap, total_cap=arm.total_cap)
    return (f"round {round_no}, phase {phase}: {kind} ({first}); {advice}. "
            f"Nothing of round {round_no} was written; rerun with the changed setting (--resume-from RUN:STEP continues after the last written round).")


class GuardedTimer:
    """The round's PhaseTimer; an OOM or CUDA error inside any phase (gen, old_log_prob, ref,
    update_actor, update_weights, save_checkpoint) becomes one TerminalError line naming the
    phase and the setting to change. The round's rows are written after every phase, in one
    transaction, so nothing of a failed round lands."""

    def __init__(self, arm: Arm, round_no: int, watch=None):
        from train.learn.timing import PhaseTimer

        self._timer, self.arm, self.round_no = PhaseTimer(watch=watch), arm, round_no
        self.seconds = self._timer.seconds

    @contextlib.contextmanager
    def phase(self, name: str):
        from train.generate.paged import KVBudgetError

        try:
            with self._timer.phase(name):
                yield
        except KVBudgetError as exc:
            raise TerminalError(f"round {self.round_no}, phase {name}: {exc}") from None
        except Exception as exc:
            if not is_device_error(exc):
                raise
            raise TerminalError(device_error_line(name, exc, self.arm, self.round_no)) from None

    def row(self, step: int) -> dict:
        return self._timer.row(step)
