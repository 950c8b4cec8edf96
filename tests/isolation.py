"""What a sandbox or mount test needs of the machine (bubblewrap, namespaces, private mounts): a
skip where the machine lacks it, a failure where ``ROLLOUT_REQUIRE_ISOLATION=1`` says it must
have it. `.ci/run` sets it: the hostile solutions, the per-node limits and the full-disk and
read-only tests must run in CI, never pass there as skips."""
from __future__ import annotations

import os

import pytest

REQUIRED = os.environ.get("ROLLOUT_REQUIRE_ISOLATION") == "1"


def lacking(reason: str) -> None:
    """Skip this test for `reason`, or fail it where isolation is required."""
    if REQUIRED:
        pytest.fail(f"{reason}; ROLLOUT_REQUIRE_ISOLATION=1 requires it here", pytrace=False)
    pytest.skip(reason)
