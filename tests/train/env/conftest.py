"""Fixtures of the trainer-environment tests: isolated env vars, short limits, a tiny task."""
from __future__ import annotations

from pathlib import Path

import pytest

CASES = Path(__file__).parent / "cases"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    monkeypatch.delenv("TRAIN_TASKS_ROOT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture
def limits(tmp_path):
    from train.env import Limits

    (tmp_path / "workspaces").mkdir()
    # The idle window is longer than the timeout: a node blocked on a cold disk for a second or
    # two reads as idle (under 2% of a core), and a full-suite run on a 2-core CI machine once
    # killed the allow-list walk so. Tests of the idle kill set their own short window.
    return Limits(timeout_s=20, idle_window_s=60, mem_gi=2, fsize_mb=8, nproc=64,
                  workspace_root=str(tmp_path / "workspaces"))


@pytest.fixture
def case():
    return lambda name: (CASES / name).read_text()


@pytest.fixture
def tiny_task(tmp_path):
    """A 4-row accuracy task with a 4-team leaderboard, built by hand."""
    from train.env import load_task

    root = tmp_path / "tasks" / "tiny-accuracy"
    (root / "public").mkdir(parents=True)
    (root / "private").mkdir()
    (root / "public" / "test.csv").write_text("id,x\n1,0.1\n2,0.2\n3,0.3\n4,0.4\n")
    (root / "public" / "sample_submission.csv").write_text("id,target\n1,a\n2,a\n3,a\n4,a\n")
    (root / "private" / "answers.csv").write_text("id,target\n1,a\n2,b\n3,a\n4,b\n")
    (root / "leaderboard.csv").write_text("teamName,score\nt1,1.0\nt2,0.75\nt3,0.5\nt4,0.25\n")
    (root / "grader.toml").write_text('metric = "accuracy"\ndirection = "higher"\n')
    (root / "description.md").write_text("# tiny\n")
    return load_task("tiny-accuracy", tmp_path / "tasks")
