"""Stability for long runs: the learning-rate schedule, KL control, and the KL/entropy band.

- `LRSchedule`: linear warmup over `warmup_steps`, then constant or cosine down to
  `min_ratio` x the base rate at `total_steps`. The rate is a function of the step number
  alone (steps count from 1, the round that produced them), so a resumed run continues the
  same curve without any saved scheduler state.
- `KLControl`: a fixed coefficient, or with `target` set the adaptive controller of Ziegler et
  al. 2019 ("Fine-Tuning Language Models from Human Preferences", the one TRL ships as
  AdaptiveKLController): after each step, coef *= 1 + clip(kl / target - 1, -0.2, 0.2) / horizon
  (one step a round here, so the horizon is counted in steps). The coefficient travels in the
  optimizer's param group (`kl_coef`), so checkpoints carry it and a resume picks it up.
- `Band`: the step's KL or entropy outside the band set with --set kl_max / entropy_min /
  entropy_max (0 = no bound) stops the run after its round is written.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from train.learn.schedule import cosine, warmup
from warehouse.errors import TerminalError

SCHEDULES = ("constant", "cosine")
KL_STEP_CLIP = 0.2  # the controller's proportional error is clipped to +-20% a step


class StabilityStopError(TerminalError):
    """A step's KL or entropy left the band the run was given: the run stops after its round."""


@dataclass(frozen=True)
class LRSchedule:
    base: float
    warmup_steps: int = 0
    kind: str = "constant"
    total_steps: int = 0  # cosine: the step where the rate reaches base * min_ratio
    min_ratio: float = 0.1

    def __post_init__(self):
        if self.kind not in SCHEDULES:
            raise TerminalError(f"--set lr_schedule={self.kind}: expected one of {', '.join(SCHEDULES)}")
        if self.warmup_steps < 0 or not 0.0 <= self.min_ratio <= 1.0:
            raise TerminalError(f"--set lr_warmup_steps={self.warmup_steps} lr_min_ratio={self.min_ratio}: "
                                "warmup must be >= 0 and the minimum ratio in [0, 1]")
        if self.kind == "cosine" and self.total_steps <= self.warmup_steps:
            raise TerminalError(f"cosine schedule: total steps ({self.total_steps}) must exceed the warmup "
                                f"({self.warmup_steps}); raise --rounds or --set lr_total_steps")

    def at(self, step: int) -> float:
        """The learning rate of step `step` (1-based)."""
        if self.warmup_steps and step <= self.warmup_steps:
            return warmup(self.base, step, self.warmup_steps)
        if self.kind == "constant":
            return self.base
        return cosine(self.base, (step - self.warmup_steps) / (self.total_steps - self.warmup_steps), self.min_ratio)


@dataclass(frozen=True)
class KLControl:
    coef: float  # the starting coefficient
    target: float = 0.0  # 0: fixed coefficient
    horizon: float = 1.0  # steps over which a full proportional correction applies

    def __post_init__(self):
        if self.target < 0 or self.horizon <= 0 or self.coef < 0:
            raise TerminalError(f"--set kl_target={self.target} kl_horizon={self.horizon} kl_coef={self.coef}: "
                                "the target and coefficient must be >= 0 and the horizon > 0")

    def next_coef(self, coef: float, kl: float | None) -> float:
        """The coefficient for the next step, given this step's coefficient and mean KL."""
        if not self.target or kl is None or not math.isfinite(kl):
            return coef
        error = min(max(kl / self.target - 1.0, -KL_STEP_CLIP), KL_STEP_CLIP)
        return coef * (1.0 + error / self.horizon)


def current_coef(optimizer, control: KLControl) -> float:
    """The coefficient in force: under a target, the one the optimizer carries (set by an
    earlier step, or by the checkpoint a run resumed from), else the starting one."""
    if not control.target:
        return control.coef
    return float(optimizer.param_groups[0].get("kl_coef", control.coef))


def set_step_state(optimizer, lr: float, kl_coef: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
        group["kl_coef"] = kl_coef


@dataclass(frozen=True)
class Band:
    kl_max: float = 0.0  # 0: no bound
    entropy_min: float = 0.0
    entropy_max: float = 0.0

    def error(self, step: int, metrics: dict) -> str | None:
        """Why step `step` left the band, or None."""
        kl, entropy = metrics.get("kl"), metrics.get("entropy")
        if self.kl_max and kl is not None and kl > self.kl_max:
            return (f"step {step}: KL to the reference {kl:.4g} is above kl_max {self.kl_max:g}. Lower "
                    "learning_rate, raise kl_coef or set kl_target, or raise kl_max; resume with "
                    f"--resume-from RUN:{step - 1} from the last good checkpoint")
        if self.entropy_min and entropy is not None and entropy < self.entropy_min:
            return (f"step {step}: entropy {entropy:.4g} is below entropy_min {self.entropy_min:g} (the "
                    "policy is collapsing). Lower learning_rate or raise the sampling temperature")
        if self.entropy_max and entropy is not None and entropy > self.entropy_max:
            return (f"step {step}: entropy {entropy:.4g} is above entropy_max {self.entropy_max:g} (the "
                    "policy is diverging). Lower learning_rate")
        return None
