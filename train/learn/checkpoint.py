"""Checkpoints: `<root>/<run_id>/global_step_<N>/` with the adapter, optimizer and RNG state.

A run resumed from `RUN:STEP` loads all three, so its next step is the step the original run
would have taken (tests/train/learn/test_learn_checkpoint.py proves it). `train run` keeps its
checkpoints by default under :func:`default_root` (a per-user data directory), the last
`KEEP_STEPS` steps of each run, so any run can resume: `--resume-from RUN` takes the latest
step that has both a checkpoint and its round in the warehouse.
"""
from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

from warehouse.errors import TerminalError

ADAPTER, OPTIMIZER, RNG, STATE = "adapter", "optimizer.pt", "rng.pt", "state.json"
KEEP_STEPS = 3  # a run's newest checkpoints kept; older ones are deleted as new ones land
STEP_PREFIX, SERVED_PREFIX = "global_step_", "served_adapter_"


def default_root() -> Path:
    """Where `train run` keeps checkpoints unless told: `$XDG_DATA_HOME/rollout-warehouse/checkpoints`
    (`~/.local/share/...` without it)."""
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "rollout-warehouse" / "checkpoints"


def saved_steps(root: Path | str, run_id: str, prefix: str = STEP_PREFIX) -> list[int]:
    """The steps of `run_id` with a whole checkpoint under `root` (state.json is written last)."""
    run_dir = Path(root) / run_id
    if not run_dir.is_dir():
        return []
    steps = [int(d.name[len(prefix):]) for d in run_dir.iterdir()
             if d.name.startswith(prefix) and d.name[len(prefix):].isdigit()]
    if prefix == STEP_PREFIX:
        steps = [n for n in steps if (step_dir(root, run_id, n) / STATE).is_file()]
    return sorted(steps)


def prune(root: Path | str, run_id: str, keep: int = KEEP_STEPS) -> None:
    """Delete all but the newest `keep` checkpoints of `run_id` (and all but its newest served
    adapter, which only the generation engine of the running process reads)."""
    import shutil

    for prefix, kept in ((STEP_PREFIX, keep), (SERVED_PREFIX, 1)):
        for n in saved_steps(root, run_id, prefix)[:-kept or None]:
            shutil.rmtree(Path(root) / run_id / f"{prefix}{n}", ignore_errors=True)


@dataclass(frozen=True)
class ResumePoint:
    run_id: str
    step: int


def step_dir(root: Path | str, run_id: str, step: int) -> Path:
    return Path(root) / run_id / f"{STEP_PREFIX}{step}"


def parse_resume(text: str) -> ResumePoint:
    """'RUN:STEP' -> ResumePoint; a malformed value names the expected form."""
    run_id, sep, step = text.rpartition(":")
    if not sep or not run_id or not step.isdigit():
        raise TerminalError(f"--resume-from {text!r}: expected RUN or RUN:STEP, e.g. 20260720_041422:10")
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
    """Write the step's checkpoint; returns its directory.

    Under FSDP every rank must call it (gathering the adapter and optimizer state is a
    collective); rank 0 alone writes, in the single-process format, so a checkpoint resumes
    under any number of ranks."""
    import torch

    out = step_dir(root, run_id, step)
    adapter, optim = _full_training_state(policy, optimizer) if is_sharded(policy) else (None, None)
    if _rank() != 0:
        return out
    out.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(out / ADAPTER, state_dict=adapter)  # None: peft reads the model itself
    torch.save(optim if optim is not None else optimizer.state_dict(), out / OPTIMIZER)
    torch.save(_rng_state(), out / RNG)
    (out / STATE).write_text(json.dumps({"run_id": run_id, "step": step, **(meta or {})}, indent=1))
    return out


def load_checkpoint(root, point: ResumePoint, policy, optimizer) -> dict:
    """Load adapter weights, optimizer and RNG state into a fresh policy; returns state.json.
    A sharded (FSDP) policy takes the same files: every rank reads them and keeps its shard."""
    import torch

    src = step_dir(root, point.run_id, point.step)
    if not (src / STATE).exists():
        raise TerminalError(
            f"no checkpoint at {src}; list {Path(root) / point.run_id} for the saved steps "
            "or pass --checkpoint-root")
    device = next(policy.parameters()).device
    optim = torch.load(src / OPTIMIZER, map_location="cpu" if is_sharded(policy) else device, weights_only=False)
    if is_sharded(policy):
        _load_sharded(src, policy, optimizer, optim)
    else:
        _load_adapter(src, policy, device)
        optimizer.load_state_dict(optim)
    _set_rng_state(torch.load(src / RNG, weights_only=False))
    return json.loads((src / STATE).read_text())


def _load_adapter(src: Path, policy, device) -> None:
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    weights = load_file(str(src / ADAPTER / "adapter_model.safetensors"), device=str(device))
    result = set_peft_model_state_dict(policy, weights)
    _check_adapter_keys(src, getattr(result, "unexpected_keys", None))


def _check_adapter_keys(src: Path, unexpected) -> None:
    """A saved adapter with weights the policy lacks came from another arm or model."""
    if unexpected:
        raise TerminalError(f"{src / ADAPTER}: adapter does not match the policy "
                            f"(unexpected {list(unexpected)[:3]}); same arm and model needed")


# --- FSDP: gather to full state on save, shard the full state on load ----------------------

def is_sharded(policy) -> bool:
    """True when the policy's weights are FSDP shards (DTensors)."""
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in policy.parameters())


def _rank() -> int:
    from train.learn.fsdp import world

    return world()[0]


def _trainable_names(policy) -> list[str]:
    """Adapter parameter names in the optimizer's order (make_optimizer takes them in this order)."""
    return [name for name, p in policy.named_parameters() if p.requires_grad]


def _full_options(**kw):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, ignore_frozen_params=True, **kw)


def _full_training_state(policy, optimizer) -> tuple[dict, dict]:
    """(adapter state, optimizer state in torch.optim's index-keyed form), full tensors on CPU
    on rank 0 and empty elsewhere. Collective: every rank calls it."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    adapter = get_model_state_dict(policy, options=_full_options(cpu_offload=True))
    optim = get_optimizer_state_dict(policy, optimizer, options=_full_options(cpu_offload=True))
    return adapter, (_by_index(optim, _trainable_names(policy)) if optim else {})


def _by_index(optim: dict, names: list[str]) -> dict:
    """Parameter names -> optimizer indices, as optimizer.state_dict() writes them."""
    index = {name: i for i, name in enumerate(names)}
    return {"state": {index[n]: v for n, v in optim["state"].items()},
            "param_groups": [{**g, "params": [index[n] for n in g["params"]]} for g in optim["param_groups"]]}


def _by_name(optim: dict, names: list[str]) -> dict:
    return {"state": {names[i]: v for i, v in optim["state"].items()},
            "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in optim["param_groups"]]}


def _load_sharded(src: Path, policy, optimizer, optim: dict) -> None:
    """Every rank reads the full files and keeps its own shard (set_*_state_dict shards them)."""
    from safetensors.torch import load_file
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    names = _trainable_names(policy)
    adapter_name = getattr(policy, "active_adapter", "default")
    weights = load_file(str(src / ADAPTER / "adapter_model.safetensors"))
    by_file_key = {name.replace(f".{adapter_name}.", "."): name for name in names}  # peft drops the adapter name
    _check_adapter_keys(src, sorted(set(weights) - set(by_file_key)))
    full = {by_file_key[k]: v for k, v in weights.items()}
    set_model_state_dict(policy, full, options=_full_options(strict=False))
    set_optimizer_state_dict(policy, optimizer, _by_name(optim, names), options=_full_options())
