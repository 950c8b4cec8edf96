"""Checkpoints: `<root>/<run_id>/global_step_<N>/` with the adapter, optimizer and RNG state.

A run resumed from `RUN:STEP` loads all three, so its next step is the step the original run
would have taken (tests/train/learn/test_learn_checkpoint.py proves it).
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from warehouse.errors import TerminalError

ADAPTER, OPTIMIZER, RNG, STATE = "adapter", "optimizer.pt", "rng.pt", "state.json"


@dataclass(frozen=True)
class ResumePoint:
    run_id: str
    step: int


def step_dir(root: Path | str, run_id: str, step: int) -> Path:
    return Path(root) / run_id / f"global_step_{step}"


def parse_resume(text: str) -> ResumePoint:
    """'RUN:STEP' -> ResumePoint; a malformed value names the expected form."""
    run_id, sep, step = text.rpartition(":")
    if not sep or not run_id or not step.isdigit():
        raise TerminalError(f"--resume-from {text!r}: expected RUN:STEP, e.g. 20260720_041422:10")
    return ResumePoint(run_id, int(step))


def _rng_state() -> dict:
    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(root, run_id: str, step: int, policy, optimizer, meta: dict | None = None) -> Path:
    """Write the step's checkpoint; returns its directory."""
    import torch

    out = step_dir(root, run_id, step)
    out.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(out / ADAPTER)
    torch.save(optimizer.state_dict(), out / OPTIMIZER)
    torch.save(_rng_state(), out / RNG)
    (out / STATE).write_text(json.dumps({"run_id": run_id, "step": step, **(meta or {})}, indent=1))
    return out


def load_checkpoint(root, point: ResumePoint, policy, optimizer) -> dict:
    """Load adapter weights, optimizer and RNG state into a fresh policy; returns state.json."""
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    src = step_dir(root, point.run_id, point.step)
    if not (src / STATE).exists():
        raise TerminalError(
            f"no checkpoint at {src}; list {Path(root) / point.run_id} for the saved steps "
            "or pass --checkpoint-root")
    device = next(policy.parameters()).device
    weights = load_file(str(src / ADAPTER / "adapter_model.safetensors"), device=str(device))
    result = set_peft_model_state_dict(policy, weights)
    if getattr(result, "unexpected_keys", None):
        raise TerminalError(f"{src / ADAPTER}: adapter does not match the policy "
                            f"(unexpected {result.unexpected_keys[:3]}); same arm and model needed")
    optimizer.load_state_dict(torch.load(src / OPTIMIZER, map_location=device, weights_only=False))
    _set_rng_state(torch.load(src / RNG, weights_only=False))
    return json.loads((src / STATE).read_text())
