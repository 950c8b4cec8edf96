"""Device errors as one line: an out-of-memory or CUDA error inside a phase of a trainer's loop
names where it was, the phase and the setting to change, and says what was not written.

`train run`'s phases are the published data roots' (gen, old_log_prob, ref, adv, update_actor,
update_weights, save_checkpoint); :class:`GuardedTimer` times them (train.learn.timing) and
turns a device error inside one into that line (`ADVICE`). `train rm`'s are its loop's
(load_model, update, save_checkpoint, soup_accumulate_export, evaluate): :func:`guarded` wraps
each (`RM_ADVICE`), and removes the directory of an artifact the phase was writing, which was
not published. Both trainers' CLIs print the line through the one error boundary.
"""
from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Callable

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


# `train rm`: the settings are its --set names (train.rm.run.RMOptions)
RM_ADVICE = {
    "load_model": "free GPU memory held by other processes, or train a smaller --model (the base with its "
                  "LoRA must fit on the device)",
    "update": "lower --set pack_tokens=... (now {pack_tokens}: the tokens of the pairs one forward packs; 0: one "
              "pair per forward) or --set max_length=... (now {max_length} tokens a side)",
    "save_checkpoint": "free GPU memory held by other processes",
    "soup_accumulate_export": "--set soup_device=cpu (now {soup_device}: the soup's running mean in host memory)",
    "evaluate": "lower --set max_length=... (now {max_length}: each evaluation pair is scored at up to that many "
                "tokens a side)",
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
    advice = ADVICE.get(phase, "see the message").format(util=arm.gpu_memory_utilization or 0.6,
                                                         response_cap=arm.response_cap, total_cap=arm.total_cap)
    return (f"round {round_no}, phase {phase}: {_what(exc)}; {advice}. "
            f"Nothing of round {round_no} was written; rerun with the changed setting (--resume-from RUN:STEP continues after the last written round).")


def rm_device_error_line(phase: str, exc: BaseException, opts, where: str) -> str:
    """The line for `train rm` (`opts`: its RMOptions), `where` the loop was ("progress 3")."""
    advice = RM_ADVICE.get(phase, "see the message").format(pack_tokens=opts.pack_tokens, max_length=opts.max_length,
                                                            soup_device=opts.soup_device)
    return (f"{where}, phase {phase}: {_what(exc)}; {advice}. Nothing of this phase was published (what the run "
            "published before it stays); rerun with the changed setting.")


def _what(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    kind = "out of GPU memory" if "out of memory" in str(exc).lower() else type(exc).__name__
    return f"{kind} ({first})"


@contextlib.contextmanager
def guarded(line: Callable[[BaseException], str], unfinished: Path | None = None):
    """A device error inside the block becomes the TerminalError `line(exc)`; `unfinished`, a
    directory the block was writing, is removed first, so no half-written artifact is left."""
    try:
        yield
    except Exception as exc:
        if not is_device_error(exc):
            raise
        if unfinished is not None:
            shutil.rmtree(unfinished, ignore_errors=True)
        raise TerminalError(line(exc)) from None


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

        with guarded(lambda exc: device_error_line(name, exc, self.arm, self.round_no)):
            try:
                with self._timer.phase(name):
                    yield
            except KVBudgetError as exc:  # its own message names the setting
                raise TerminalError(f"round {self.round_no}, phase {name}: {exc}") from None

    def row(self, step: int) -> dict:
        return self._timer.row(step)
