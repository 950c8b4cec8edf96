"""Shared fixtures: one sample root per session (it is read-only for the tests)."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    monkeypatch.delenv("ROLLOUT_WAREHOUSE_DB", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture(scope="session", autouse=True)
def _db_template(tmp_path_factory):
    from tests.ingest import helpers
    from warehouse.migrate import init_db

    template = tmp_path_factory.mktemp("template") / "template.duckdb"
    init_db(f"duckdb:///{template}")
    helpers._TEMPLATE[:] = [template]


@pytest.fixture(scope="session")
def sample_root(tmp_path_factory):
    from ingest.sample import write_sample_root

    return write_sample_root(tmp_path_factory.mktemp("sample") / "root", seed=0)


@pytest.fixture(scope="session")
def small_root(tmp_path_factory, sample_root):
    """Two runs of the sample (one per style), for tests that ingest several times."""
    import shutil

    root = tmp_path_factory.mktemp("small") / "root"
    for run in ("20260719_045416_27b_mix4_hr", "20260702_020809"):
        shutil.copytree(sample_root / run, root / run)
    return root
