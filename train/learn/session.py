"""The learner as the `train run` loop sees it: one object holding the policy, the optimizer and
the run's learning options, with the three calls the loop makes per round.

    learner.step(samples, timer, step)     old_log_prob, ref, adv, update_actor, save_checkpoint
    learner.after_commit(db_url, step)     step_metrics row, health gate (first step), decision rule

`Learner.start` loads a checkpoint for `--resume-from RUN:STEP`: the new run continues the
round and step numbering after STEP, and its run row records where it came from.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from train.learn.checkpoint import ResumePoint, load_checkpoint, parse_resume, save_checkpoint
from train.learn.gates import check_health_gate, decision_rule, format_decision
from train.learn.step import Sample, StepConfig, grpo_step
from train.learn.store import write_step_metrics


@dataclass
class LearnOptions:
    resume_from: str | None = None  # "RUN:STEP"
    health_gate: bool = True
    decision_steps: tuple = ()
    checkpoint_every: int = 5  # steps; 0 = never
    checkpoint_root: str = "checkpoints"
    token_budget: int | None = None  # default: the arm's total cap (at least 4096)


@dataclass
class Learner:
    policy: object  # the peft model
    optimizer: object
    config: StepConfig
    run_id: str
    opts: LearnOptions
    resumed: ResumePoint | None = None
    first_step: int | None = None
    last_metrics: dict = field(default_factory=dict)

    @classmethod
    def start(cls, policy, run_id: str, lr: float, total_cap: int | None, opts: LearnOptions, log=print):
        """Prepare the policy for training; load the checkpoint when resuming."""
        from train.learn.lora import make_optimizer, prepare_for_training

        prepare_for_training(policy, selective=True)
        budget = opts.token_budget or max(total_cap or 0, 4096)
        learner = cls(policy, make_optimizer(policy, lr), StepConfig(token_budget=budget), run_id, opts)
        if opts.resume_from:
            learner.resumed = parse_resume(opts.resume_from)
            load_checkpoint(opts.checkpoint_root, learner.resumed, policy, learner.optimizer)
            log(f"Resumed from {learner.resumed.run_id} step {learner.resumed.step} "
                f"(adapter, optimizer and RNG state from {opts.checkpoint_root})")
        return learner

    def first_round(self, default: int) -> int:
        """A resumed run continues after the checkpoint's step."""
        return self.resumed.step + 1 if self.resumed else default

    def step(self, samples: list[Sample], timer, step: int) -> dict:
        self.first_step = step if self.first_step is None else self.first_step
        self.last_metrics = grpo_step(self.policy, self.optimizer, samples, self.config, timer)
        every = self.opts.checkpoint_every
        if every and step % every == 0:
            with timer.phase("save_checkpoint"):
                save_checkpoint(self.opts.checkpoint_root, self.run_id, step, self.policy, self.optimizer,
                                meta=self._lineage())
        return self.last_metrics

    def _lineage(self) -> dict:
        if not self.resumed:
            return {}
        return {"resumed_from_run": self.resumed.run_id, "resumed_from_step": self.resumed.step}

    def after_commit(self, db_url: str, step: int, log=print) -> None:
        """Once the round is in the warehouse: metrics row, then the gates that read it."""
        after_commit(db_url, self.run_id, step, self.last_metrics, health_gate=(
            self.opts.health_gate and step == self.first_step), decision_steps=self.opts.decision_steps, log=log)


def after_commit(db_url: str, run_id: str, step: int, metrics: dict, health_gate: bool,
                 decision_steps=(), log=print) -> None:
    """The step's `step_metrics` row; the health gate when asked (the run's first step: raises
    HealthGateError on failure); the decision rule's reading when `step` is a decision step."""
    from warehouse.db import connect

    with connect(db_url) as con:
        write_step_metrics(con, run_id, step, metrics)
    if health_gate:
        with connect(db_url, read_only=True) as con:
            log(check_health_gate(con, run_id))
    if step in decision_steps:
        with connect(db_url, read_only=True) as con:
            log(format_decision(decision_rule(con, run_id, step), run_id, step))
