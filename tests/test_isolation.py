"""The guard that keeps CI from passing the sandbox and mount tests as skips."""
from __future__ import annotations

import pytest

from tests import isolation


def test_a_missing_sandbox_skips_here_and_fails_where_it_is_required(monkeypatch):
    monkeypatch.setattr(isolation, "REQUIRED", False)
    with pytest.raises(pytest.skip.Exception, match="no bubblewrap here"):
        isolation.lacking("no bubblewrap here")
    monkeypatch.setattr(isolation, "REQUIRED", True)
    with pytest.raises(pytest.fail.Exception, match="no bubblewrap here; ROLLOUT_REQUIRE_ISOLATION=1 requires it"):
        isolation.lacking("no bubblewrap here")
