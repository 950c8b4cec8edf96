"""The reward table: one function owns it (the seeds' sentinels, DATA.md "Value facts")."""
from __future__ import annotations

FAILED = -0.5  # crashed, timeout, no_code, no_submission, invalid_submission
IDLE = -0.2  # killed for leaving its CPU or GPU idle
INFRASTRUCTURE = -1.0  # the sandbox itself failed
IDLE_EXC_TYPES = frozenset({"CpuIdleError", "GpuIdleError"})
INFRASTRUCTURE_EXC_TYPE = "InfrastructureError"


def reward_for(status: str, exc_type: str | None, humanrank: float | None) -> float:
    """The reward GRPO trains on: humanrank in [0, 1] for ok, else a sentinel."""
    if status == "ok":
        if humanrank is None or not 0.0 <= humanrank <= 1.0:
            raise ValueError(f"an ok node needs a humanrank in [0, 1], got {humanrank!r}")
        return float(humanrank)
    if exc_type == INFRASTRUCTURE_EXC_TYPE:
        return INFRASTRUCTURE
    if exc_type in IDLE_EXC_TYPES:
        return IDLE
    return FAILED
