"""The learning-rate schedule's shape, said once for both trainers and the tiny policy: a linear
warmup to the base rate, then a half cosine from the base rate down to a floor.

Its users count steps their own way, and keep doing so: `train run` (train.learn.control's
LRSchedule) from 1, the round that produced the step; `train rm` with torch's LambdaLR, from 0,
so its first step after the warmup is at the peak; the tiny policy's pre-training from 1.
"""
from __future__ import annotations

import math


def warmup(base: float, step: int, steps: int) -> float:
    """The rate at step `step` of a linear warmup of `steps` steps (`base` at step `steps`)."""
    return base * step / steps


def cosine(base: float, progress: float, floor: float = 0.0) -> float:
    """The rate at `progress` through the decay: `base` at 0, `floor` x `base` at 1 and after."""
    return base * (floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress))))
