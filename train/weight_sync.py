"""`update_weights`: after the GRPO step, make the generator sample from the updated policy.

A backend that shares the trained module (transformers, one process) already does. One that
loads weights (`Capabilities.weight_load`: vLLM's default) gets the policy's weights with every
LoRA delta merged in, in place; one that declares an adapter swap (`Capabilities.adapter_swap`:
vLLM's lora sync) gets the adapter saved and served under a fresh id. One with weights of its
own (`Capabilities.own_weights`: vLLM) gets them before round 1 of a resumed run too, since it
loaded the base model. Under FSDP the adapter is gathered (every rank joins the collective)
and loaded into every rank's unsharded generation copy, so every rank samples from rank 0's
weights.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from warehouse.errors import TerminalError

from train.settings import RunOptions

if TYPE_CHECKING:
    from train.learn.learner import Learner
    from train.policy.loader import Policy


def _silent(line: str) -> None:
    """No log: the ranks other than 0 (rank 0 speaks for the run)."""


def update_weights(backend, learner: Learner, opts: RunOptions, run_id: str, round_no: int, team=None,
                   generator: Policy | None = None, log=_silent) -> None:
    """Make the generator sample from the updated policy (module docstring)."""
    if team is not None and team.sharded:
        return _update_sharded(backend, learner, opts, run_id, round_no, team, generator, log)
    if backend.capabilities.weight_load:
        backend.load_weights(learner.policy.model)
        log("  update_weights: the merged weights are loaded into the engine")
        return
    if not backend.capabilities.adapter_swap:
        return
    root = served_adapter_dir(opts, run_id, round_no)
    learner.policy.model.save_pretrained(root)
    serve_adapter(backend, root, log)


def serve_adapter(backend, adapter_dir, log) -> None:
    adapter_id = backend.set_adapter(str(adapter_dir))
    log(f"  update_weights: the adapter is served as LoRA id {adapter_id} ({adapter_dir})")


def served_adapter_dir(opts: RunOptions, run_id: str, round_no: int) -> Path:
    import tempfile

    return Path(opts.checkpoint_root or tempfile.gettempdir()) / run_id / f"served_adapter_{round_no}"


def _update_sharded(backend, learner: Learner, opts: RunOptions, run_id: str, round_no: int, team,
                    generator: Policy | None, log=_silent) -> None:
    state = sync_generator(generator, learner, team)
    if team.main and backend.capabilities.adapter_swap:
        root = served_adapter_dir(opts, run_id, round_no)
        learner.policy.model.save_pretrained(root, state_dict=state)
        serve_adapter(backend, root, log)


def generation_copy(policy: Policy, opts: RunOptions) -> Policy:
    """This rank's unsharded policy for generation (FSDP shards the training one; every rank
    generates its share of each call); taken before the learner prepares and shards it, so
    before the backend exists: a backend with weights of its own (`Capabilities.own_weights`,
    declared by its class: vLLM) needs no copy."""
    from train.generate.choice import backend_class

    if backend_class(opts.backend).capabilities.own_weights:
        return policy
    import copy

    return dataclasses.replace(policy, model=copy.deepcopy(policy.model))


def sync_generator(generator: Policy | None, learner: Learner, team) -> dict:
    """Gather the adapter (a collective: every rank calls it) and load it into this rank's
    generation copy, so every rank samples from rank 0's weights; returns the gathered state."""
    from train.learn.fsdp import full_adapter_state

    state = full_adapter_state(learner.policy.model)
    if generator is not None and generator.model is not learner.policy.model:
        result = generator.model.load_state_dict(state, strict=False)
        if result.unexpected_keys:
            raise TerminalError(f"the generation copy lacks adapter weights {result.unexpected_keys[:3]}")
    return state
