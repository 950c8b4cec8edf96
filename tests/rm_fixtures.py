"""Reward-model (seed 004) fixtures shared by the ingest, SQL, gate and report tests.

`rm_root` writes the sample's reward-model run (ingest/rm_sample.py) alone into a data
root; `rm_template` is a warehouse with it ingested (once per session); `rm_url` a copy.
Import the fixtures into a test module with `from tests.rm_fixtures import *`.
"""
from __future__ import annotations

import shutil

import pytest

from ingest.rm_sample import RM_RUN

__all__ = ["RM_RUN", "rm_root", "rm_template", "rm_url", "ingest", "copy_template"]


def ingest(url: str, root):
    from ingest.pipeline import ingest_roots

    return ingest_roots(url, [str(root)])


def copy_template(template, tmp_path, name: str = "rm.duckdb") -> str:
    target = tmp_path / name
    shutil.copyfile(template, target)
    return f"duckdb:///{target}"


@pytest.fixture
def rm_root(tmp_path):
    """A data root holding only the sample's (clean) reward-model run."""
    from ingest.rm_sample import write_rm_run

    root = tmp_path / "root"
    write_rm_run(root)
    return root


@pytest.fixture(scope="session")
def rm_template(template_db, tmp_path_factory):
    from ingest.rm_sample import write_rm_run

    folder = tmp_path_factory.mktemp("rm_template")
    write_rm_run(folder / "root")
    path = folder / "rm.duckdb"
    shutil.copyfile(template_db, path)
    report = ingest(f"duckdb:///{path}", folder / "root")
    assert report.exit_code == 0, report.errors
    return path


@pytest.fixture
def rm_url(rm_template, tmp_path) -> str:
    return copy_template(rm_template, tmp_path)
