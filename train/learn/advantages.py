"""Advantages for a round's nodes: `grpo_valid_only`.

reward minus the mean of the node's sibling group; no std scaling. Infrastructure failures
(reward -1.0) are excluded from the baseline and get zero advantage; a group with no spread
among its other members gives zero advantage to all of them.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

INFRA_FAILURE_REWARD = -1.0


def is_infra_failure(reward: float | None) -> bool:
    return reward is None or reward == INFRA_FAILURE_REWARD


def grpo_valid_only(rewards: Sequence[float | None], groups: Sequence[str]) -> list[float]:
    """One advantage per node, in input order. `groups[i]` is node i's sibling group."""
    if len(rewards) != len(groups):
        raise ValueError(f"{len(rewards)} rewards but {len(groups)} group labels")
    members: dict[str, list[int]] = defaultdict(list)
    for i, (reward, group) in enumerate(zip(rewards, groups)):
        if not is_infra_failure(reward):
            members[group].append(i)
    advantages = [0.0] * len(rewards)
    for indices in members.values():
        values = [float(rewards[i]) for i in indices]
        if max(values) == min(values):  # no spread: no signal
            continue
        baseline = sum(values) / len(values)
        for i, value in zip(indices, values):
            advantages[i] = value - baseline
    return advantages
