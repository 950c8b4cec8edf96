"""The reward table: one function owns it (the sentinels are warehouse.vocabulary's; their
definition: docs/data-roots.md, "Node records")."""
from __future__ import annotations

from warehouse.vocabulary import (FAILED_REWARD, IDLE_EXC_TYPES, IDLE_REWARD, INFRASTRUCTURE_EXC_TYPE,
                                  INFRASTRUCTURE_REWARD, OK)


def reward_for(status: str, exc_type: str | None, humanrank: float | None) -> float:
    """The reward GRPO trains on: humanrank in [0, 1] for ok, else a sentinel."""
    if status == OK:
        if humanrank is None or not 0.0 <= humanrank <= 1.0:
            raise ValueError(f"an ok node needs a humanrank in [0, 1], got {humanrank!r}")
        return float(humanrank)
    if exc_type == INFRASTRUCTURE_EXC_TYPE:
        return INFRASTRUCTURE_REWARD
    if exc_type in IDLE_EXC_TYPES:
        return IDLE_REWARD
    return FAILED_REWARD
