"""`train run`'s learner: the GRPO step's call site in the loop. It lives in train/learn/ beside
the step it calls, in a higher import layer than the rest of the package, since it reads the
run's settings (pyproject.toml's import layers). It holds the policy prepared for the update, its
optimizer, the run's learning-rate schedule, KL control and stability band
(train.learn.control), and the update's variant chosen each step (train.learn.variant).
train.learn owns the step itself (old_log_prob, ref, adv, update_actor:
:func:`train.learn.step.grpo_step`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from warehouse.arms import Arm
from warehouse.errors import TerminalError

from train.settings import Knobs, RunOptions, check_choice

if TYPE_CHECKING:  # annotations only: torch and the step load when a learner is made
    import torch

    from train.device_errors import GuardedTimer
    from train.learn.checkpoint import ResumePoint
    from train.learn.control import Band, KLControl, LRSchedule
    from train.learn.step import Sample, StepConfig
    from train.learn.variant import StepMemory, UpdateVariant, UpdateVariants
    from train.policy.loader import Policy


@dataclass
class Learner:
    """The GRPO step's call site (train.learn owns the step itself), with the run's learning-rate
    schedule and KL control (train.learn.control)."""

    policy: Policy
    optimizer: torch.optim.Optimizer
    config: StepConfig
    schedule: LRSchedule | None = None  # None: the optimizer's rate as it is
    kl: KLControl | None = None  # None: the config's fixed coefficient
    band: Band | None = None  # the KL / entropy bounds checked after the round is written
    variants: UpdateVariants | None = None  # kept layers and compiled norms per step; None: as prepared
    tokens: list = dataclasses.field(default_factory=list)  # the last step's TokenRecord per sample

    def step(self, samples: list[Sample], timer: GuardedTimer, step_no: int = 1) -> dict:
        """One GRPO step on the round's samples (every rank calls it under FSDP): the rate of
        step `step_no`, the coefficient in force; the next coefficient is set from its KL."""
        from train.learn.control import current_coef, set_step_state

        lr = self.schedule.at(step_no) if self.schedule else self.optimizer.param_groups[0]["lr"]
        coef = current_coef(self.optimizer, self.kl) if self.kl else self.config.loss.kl_coef
        set_step_state(self.optimizer, lr, coef)
        config = dataclasses.replace(self.config, loss=dataclasses.replace(self.config.loss, kl_coef=coef))
        if self.variants is None:
            return self._grpo_step(samples, config, timer, lr, coef)
        variant, memory, device = self._choose_variant()
        config = dataclasses.replace(config, compile_norms=variant.compile_norms)
        metrics = self._grpo_step(samples, config, timer, lr, coef)
        return {**metrics, **self._record_variant(variant, memory, device, metrics)}

    def _grpo_step(self, samples: list[Sample], config: StepConfig, timer: GuardedTimer, lr: float,
                   coef: float) -> dict:
        from train.learn.control import set_step_state
        from train.learn.step import grpo_step

        metrics = grpo_step(self.policy.model, self.optimizer, samples, config, timer, tokens=self.tokens)
        if self.kl:  # every rank reads the same all-reduced KL: the coefficient stays in step
            set_step_state(self.optimizer, lr, self.kl.next_coef(coef, metrics.get("kl")))
        return {**metrics, "kl_coef": coef}

    def _choose_variant(self) -> tuple[UpdateVariant, StepMemory, torch.device]:
        """This step's variant from the memory free at its start (after generation); its kept
        layers are set on the model now, its compiled norms travel in the step's config."""
        from train.learn.lora import keep_last_layers
        from train.learn.variant import StepMemory

        device = next(self.policy.model.parameters()).device
        memory = StepMemory.now(device)
        variant = self.variants.choose(device.type, memory.free)
        keep_last_layers(self.policy.model, variant.keep_layers)
        return variant, memory, device

    def _record_variant(self, variant: UpdateVariant, memory: StepMemory, device: torch.device,
                        metrics: dict) -> dict:
        from train.learn.variant import variant_metrics

        peak = memory.peak_above(device)
        self.variants.measured(variant, metrics.get("largest_micro_batch"), peak)
        return variant_metrics(variant, memory, peak)

    def check_band(self, step_no: int, metrics: dict) -> None:
        """Stop (after the round is in the warehouse) when the step left the KL / entropy band."""
        from train.learn.control import StabilityStopError

        reason = self.band.error(step_no, metrics) if self.band else None
        if reason:
            raise StabilityStopError(reason)

    def save(self, root: str, run_id: str, step: int):
        """The step's checkpoint; the run's older ones beyond the newest KEEP_STEPS are deleted."""
        from train.learn.checkpoint import prune, save_checkpoint
        from train.learn.fsdp import world

        out = save_checkpoint(root, run_id, step, self.policy.model, self.optimizer)
        if world()[0] == 0:  # rank 0 deletes
            prune(root, run_id)
        return out


def make_learner(policy: Policy, arm: Arm, overrides: dict, opts: RunOptions, resume: ResumePoint | None = None,
                 team=None, knobs: Knobs | None = None, base: tuple[int, int] | None = None) -> Learner:
    """Prepare (and under FSDP shard) the policy, then the optimizer over its adapter, then the
    checkpoint when resuming (the optimizer must see the sharded parameters). `base`: the update's
    peak measured by the resumed run (:func:`resumed_update_base`)."""
    from train.learn.lora import make_optimizer

    if resume is not None and not opts.checkpoint_root:
        raise TerminalError("--resume-from with learning needs --checkpoint-dir holding "
                            f"{resume.run_id}/global_step_{resume.step} (or pass --no-learn).")
    knobs = knobs or Knobs()
    config = step_config(arm, knobs)
    variants = prepare_update(policy.model, knobs, config, sharded=team is not None and team.sharded)
    variants.base = base
    if team is not None and team.sharded:
        from train.learn.fsdp import shard_policy

        shard_policy(policy.model)
    optimizer = make_optimizer(policy.model, overrides.get("learning_rate") or arm.learning_rate)
    if resume is not None:
        from train.learn.checkpoint import load_checkpoint

        load_checkpoint(opts.checkpoint_root, resume, policy.model, optimizer)
    first = opts.first_round or (resume.step + 1 if resume else 1)
    lr = overrides.get("learning_rate") or arm.learning_rate
    return Learner(policy, optimizer, config, *stability(knobs, lr, first + opts.rounds - 1), variants=variants)


def prepare_update(model, knobs: Knobs, config: StepConfig, sharded: bool = False) -> UpdateVariants:
    """Ready `model` for the update as the loop runs it: selective checkpointing (attention
    outputs kept), fused LoRA; returns the per-step chooser of kept layers and compiled norms
    (train.learn.variant) for micro-batches up to the config's token budget."""
    from train.learn.lora import prepare_for_training
    from train.learn.variant import ModelShape, UpdateVariants

    prepare_for_training(model, selective=True)
    return UpdateVariants(ModelShape.of(model), config.token_budget, variant_setting(knobs), sharded=sharded)


def variant_setting(knobs: Knobs):
    """--set keep_layers / compile_norms as the chooser's setting (None: auto)."""
    from train.learn.variant import VariantSetting

    if knobs.keep_layers is None or knobs.keep_layers < -1:
        raise TerminalError(f"--set keep_layers={knobs.keep_layers}: use -1 (as many as fit) or a count of layers")
    check_choice(knobs, "compile_norms")
    keep = None if knobs.keep_layers == -1 else knobs.keep_layers
    return VariantSetting(keep, None if knobs.compile_norms == "auto" else knobs.compile_norms == "on")


def stability(knobs: Knobs, lr: float, last_step: int) -> tuple[LRSchedule, KLControl, Band]:
    """(schedule, KL control, band) from the knobs; the schedule's base rate is `lr`."""
    from train.learn.control import Band, KLControl, LRSchedule

    schedule = LRSchedule(base=lr, warmup_steps=knobs.lr_warmup_steps, kind=knobs.lr_schedule,
                          total_steps=knobs.lr_total_steps or last_step, min_ratio=knobs.lr_min_ratio)
    return (schedule, KLControl(knobs.kl_coef, target=knobs.kl_target, horizon=knobs.kl_horizon),
            Band(knobs.kl_max, knobs.entropy_min, knobs.entropy_max))


def step_config(arm: Arm, knobs: Knobs) -> StepConfig:
    """The GRPO step's settings: the micro-batch budget covers the arm's total cap."""
    from train.learn.loss import LossConfig
    from train.learn.step import StepConfig

    if knobs.update_epochs < 1:
        raise TerminalError(f"--set update_epochs={knobs.update_epochs}: needs at least 1")
    return StepConfig(token_budget=max(arm.total_cap or 0, 4096), epochs=knobs.update_epochs,
                      loss=LossConfig(clip_eps=knobs.clip_eps, kl_coef=knobs.kl_coef))


def round_samples(result) -> list[Sample]:
    """The learner's view of a round: every sibling is a sample of its group."""
    from train.learn.step import Sample

    return [Sample(c.prompt_token_ids, c.response_token_ids, r["reward"], r["sibling_group"])
            for task in result.records for r, c in zip(result.records[task], result.completions[task])]


def record_round(result, version: int, tokens: list | None = None, step: int | None = None) -> None:
    """Add to the round's node records the weights that generated them (`policy_version`) and,
    when the round was learnt from, what step `step` computed for each node's tokens (the
    TokenRecords of :func:`round_samples`' order): the record path lands them in
    `nodes.policy_version` and `node_train_tokens`."""
    for task in result.records:
        for record in result.records[task]:
            record["policy_version"] = version
    trained = [r for task in result.records for r, _ in zip(result.records[task], result.completions[task])]
    for record, token in zip(trained, tokens or []):
        if token is not None:
            record.update(train_step=step, advantage=_finite(token.advantage),
                          trainer_logprobs=[_finite(v) for v in token.trainer_logprobs],
                          ref_logprobs=[_finite(v) for v in token.ref_logprobs], ratios=[_finite(v) for v in token.ratios])


def _finite(value: float) -> float | None:
    """A NaN or infinite value (a diverged step) as null: JSON has no such numbers, and a line
    holding one would be rejected whole, taking its node with it."""
    import math

    return value if math.isfinite(value) else None


def resumed_update_base(opts: RunOptions, resume: ResumePoint | None) -> tuple[int, int] | None:
    """The update's measured base (largest micro-batch, peak above the step's start, of a step
    that kept no layers) from the resumed lineage's `step_metrics`, so that a resumed process
    keeps layers from its first step instead of measuring again (train.learn.variant)."""
    if resume is None or not opts.learn:
        return None
    import json

    from train.learn.variant import resumed_base
    from train.rollout.lineage import lineage
    from warehouse.db import connect

    with connect(opts.db_url, read_only=True) as con:
        extras = [extra for run, last in lineage(con, resume.run_id, resume.step) for (extra,) in con.execute(
            'SELECT "extra" FROM "step_metrics" WHERE "run_id" = ? AND "step" <= ? ORDER BY "step"',
            [run, last]).fetchall() if extra]
    return resumed_base([json.loads(e) if isinstance(e, str) else e for e in extras])
