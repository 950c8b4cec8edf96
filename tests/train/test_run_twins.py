"""`train run --tasks-root` on a directory of the arms' competitions' synthetic twins (MLE-bench
layout, registry config.yaml, their real id columns and metrics): two CPU rounds with the tiny
policy complete, on the arm's own tasks, and every node lands with a status."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.train.env.twins import COMPETITIONS, build_twin

pytestmark = pytest.mark.slow
STATUSES = {"ok", "crashed", "timeout", "no_code", "no_submission", "invalid_submission"}


@pytest.fixture(scope="module")
def tiny_cache(tmp_path_factory) -> Path:
    """$TRAIN_TINY_POLICY_DIR when set (CI builds it once), else a module temp dir."""
    env = os.environ.get("TRAIN_TINY_POLICY_DIR")
    return Path(env) if env else tmp_path_factory.mktemp("tiny-policy")


def test_two_cpu_rounds_on_the_arms_twins(tmp_path, db_url, tiny_cache, monkeypatch):
    from train.cli import main
    from warehouse.db import connect

    for competition in COMPETITIONS:
        build_twin(tmp_path / "twins", competition)
    monkeypatch.setenv("TRAIN_TINY_POLICY_DIR", str(tiny_cache))
    result = CliRunner().invoke(main, [
        "run", "--arm", "hr24k_u6", "--model", "tiny", "--device", "cpu", "--rounds", "2", "--no-learn",
        "--tasks-root", str(tmp_path / "twins"), "--db", db_url.removeprefix("duckdb:///"),
        "--set", "siblings_per_expansion=2", "--set", "exec_timeout_s=60", "--run-id", "twins"])
    assert result.exit_code == 0, result.output
    with connect(db_url, read_only=True) as con:
        nodes = con.execute("SELECT task, round, status FROM nodes WHERE run_id = 'twins'").fetchall()
        notes = con.execute("SELECT notes FROM runs WHERE run_id = 'twins'").fetchone()[0]
    from warehouse.arms import get_arm

    assert {task for task, _, _ in nodes} == set(get_arm("hr24k_u6").tasks)  # the twins, not the bundled tasks
    assert not notes
    assert {r for _, r, _ in nodes} == {1, 2} and {s for _, _, s in nodes} <= STATUSES
