"""Shared fixtures: one sample root per session (it is read-only for the tests)."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    monkeypatch.delenv("ROLLOUT_WAREHOUSE_DB", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture(scope="session")
def sample_root(tmp_path_factory):
    from ingest.sample import write_sample_root

    return write_sample_root(tmp_path_factory.mktemp("sample") / "root", seed=0)
