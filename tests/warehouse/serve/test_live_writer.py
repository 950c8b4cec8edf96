"""The dashboard read while `train run --model tiny` writes the same warehouse: pages are
fetched in a loop for the whole run, every answer is a page or "busy" (never an error), the
trainer commits every round (none spooled for want of the lock), and the run page's version
moves as rounds land."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from tests.warehouse.serve.conftest import sql

pytestmark = pytest.mark.slow
RUN_ID = "live_dashboard_run"


@pytest.fixture(scope="module")
def tiny_cache(tmp_path_factory) -> Path:
    """$TRAIN_TINY_POLICY_DIR when set (CI builds it once), else a module temp dir."""
    env = os.environ.get("TRAIN_TINY_POLICY_DIR")
    return Path(env) if env else tmp_path_factory.mktemp("tiny-policy")


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_pages_read_while_train_run_writes(tmp_path, tiny_cache):
    from warehouse.migrate import init_db
    from warehouse.serve.server import background

    url = f"duckdb:///{tmp_path / 'live.duckdb'}"
    init_db(url)
    env = {**os.environ, "TRAIN_TINY_POLICY_DIR": str(tiny_cache)}
    trainer = subprocess.Popen(
        [sys.executable, "-m", "train.cli", "run", "--model", "tiny", "--db", str(tmp_path / "live.duckdb"),
         "--run-id", RUN_ID, "--rounds", "2", "--tasks", "mini-regression-rmse,mini-tabular-accuracy",
         "--set", "siblings_per_expansion=4", "--set", "expansions_per_round=1", "--exec-workers", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    answers, versions = Counter(), []
    with background(url) as base:
        pages = ["/", f"/runs/{RUN_ID}", f"/api/runs/{RUN_ID}/version", f"/compare?run={RUN_ID}", "/quality"]
        while trainer.poll() is None:
            for page in pages:
                status, body = fetch(base + page)
                answers[status] += 1
                if page.startswith("/api/") and status == 200:
                    versions.append(body)
            time.sleep(0.5)  # leave the trainer the machine's cores
        output = trainer.stdout.read()
        assert trainer.returncode == 0, output
        status, body = fetch(f"{base}/runs/{RUN_ID}")
    assert set(answers) <= {200, 404, 503}, answers  # 404: the run page before the first round
    assert answers[200] > 10, answers
    assert "spooled" not in output  # the trainer always got the lock within its wait
    assert sql(url, 'SELECT count(DISTINCT "round") FROM "nodes" WHERE "run_id" = ?', RUN_ID)[0][0] == 2
    assert len(set(versions)) >= 2  # the page saw the run change while it was written
    assert status == 200 and 'data-rounds="2"' in body and 'id="step-loss"' in body
