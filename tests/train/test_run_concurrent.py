"""Runs launched together keep their own identity: a seed sweep started from a script, eight
`train run` processes of one arm at once into one warehouse file, ends as eight runs, each
with every node it generated (before run ids were unique, runs started in the same second
shared an id and one seed's round silently replaced another's). A round that waited too long
for the file's lock is spooled, and ingesting the spool completes its run (train.writer).

Slow: eight Python processes importing torch at once (about two minutes on 2 cores). Each
runs one round of one expansion of 8 siblings on one bundled task with the random tiny Llama
of the shared fixtures, which writes no code, so nothing executes."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.train.test_run import TASK, model_dir, tiny_model, tiny_tokenizer  # noqa: F401 - shared fixtures

pytestmark = pytest.mark.slow

RUNS, SIBLINGS = 8, 8


def test_eight_runs_of_one_arm_launched_at_once_all_land_whole(db_url, model_dir, tmp_path):
    db = db_url.removeprefix("duckdb:///")
    args = ["run", "--arm", "hr24k_u6", "--model", str(model_dir), "--rounds", "1", "--no-learn",
            "--db", db, "--tasks", TASK, "--set", f"siblings_per_expansion={SIBLINGS}",
            "--set", "expansions_per_round=1", "--set", "response_cap=16", "--exec-workers", "1"]
    procs = [subprocess.Popen([sys.executable, "-m", "train.cli", *args, "--seed", str(seed)], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for seed in range(1, RUNS + 1)]
    outputs = [proc.communicate(timeout=900)[0] for proc in procs]
    for proc, out in zip(procs, outputs):
        where = re.search(rf"Round 1: {SIBLINGS} nodes generated.* -> (db|spool)$", out, re.M)
        assert where, out
        assert proc.returncode == (3 if where.group(1) == "spool" else 0), out  # 3: spooled, says how to load
    said = {int(re.search(r"seed (\d+)", out).group(1)): re.search(r"^Run (\S+): arm", out, re.M).group(1)
            for out in outputs}
    _ingest_spools(db_url, tmp_path)
    from tests.ingest.helpers import rows

    assert rows(db_url, "SELECT seed, run_id FROM runs ORDER BY seed") == sorted(said.items())
    per_run = rows(db_url, "SELECT run_id, count(*), count(DISTINCT node_id), min(round), max(round) "
                           "FROM nodes GROUP BY run_id ORDER BY run_id")
    assert per_run == [(run_id, SIBLINGS, SIBLINGS, 1, 1) for run_id in sorted(said.values())]
    assert all(run_id.endswith("_hr24k_u6") for run_id in said.values())


def _ingest_spools(db_url: str, cwd) -> None:
    """A round whose commit waited past the lock timeout (8 writers queue for one file on a
    loaded machine) is spooled next to the run, as `train run` says; load it as it says."""
    from ingest.pipeline import ingest_roots

    for spool in sorted(cwd.glob("spool_*")):
        report = ingest_roots(db_url, [str(spool)], [str(spool / "manifest.toml")])
        assert report.exit_code == 0, report.errors
