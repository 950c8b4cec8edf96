"""The demo warehouse (the synthetic sample root: both roots' shapes and every edge case),
built once per session for the dashboard's tests, which only read it."""
from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory):
    from ingest.pipeline import build_demo

    root = tmp_path_factory.mktemp("demo")
    url = f"duckdb:///{root / 'demo.duckdb'}"
    build_demo(url, str(root / "sample"), seed=0)
    return root / "demo.duckdb"


@pytest.fixture(scope="module")
def demo_url(demo_template, tmp_path_factory) -> str:
    """A copy per module, so a module that writes (a new round) leaves the others alone."""
    target = tmp_path_factory.mktemp("demo_copy") / "demo.duckdb"
    shutil.copyfile(demo_template, target)
    url = f"duckdb:///{target}"
    add_violations(url)
    return url


def add_violations(url: str) -> None:
    """The sample is clean; the quality page needs offenders: a run whose round has an ok node
    rewarded 1.5 (invariant 1) and a node whose parent is in no run (invariant 8)."""
    from train.writer import RoundWrite, RunRow, commit_round

    bad = [_record("quality_probe", 1, "cactus", 0), _record("quality_probe", 1, "cactus", 1)]
    bad[0]["reward"] = 1.5
    bad[1].update(mode="improve", parent_id="no-such-parent")
    commit_round(url, RunRow("quality_probe", None, None, "test", 0),
                 RoundWrite(1, {"cactus": bad}, {"cactus": None}))


def sql(url: str, query: str, *params):
    import duckdb

    from warehouse.config import db_path_from_url

    con = duckdb.connect(db_path_from_url(url), read_only=True)
    try:
        return con.execute(query, list(params)).fetchall()
    finally:
        con.close()


def add_round(url: str, run_id: str, tasks: list[str], rnd: int, nodes_per_task: int = 4) -> None:
    """Commit one more round of `run_id` the way `train run` does (train.writer.commit_round)."""
    from train.writer import RoundWrite, RunRow, commit_round

    records = {task: [_record(run_id, rnd, task, i) for i in range(nodes_per_task)] for task in tasks}
    row = sql(url, 'SELECT "arm", "question_id", "model", "seed" FROM "runs" WHERE "run_id" = ?', run_id)
    arm, question, model, seed = row[0] if row else (None, None, "test", 0)
    commit_round(url, RunRow(run_id, arm, question, model or "test", seed or 0),
                 RoundWrite(rnd, records, {t: None for t in tasks}))


def _record(run_id: str, rnd: int, task: str, i: int) -> dict:
    ok = i % 2 == 0
    return {"id": f"{run_id}-r{rnd}-{task}-{i}", "round": rnd, "step": rnd, "mode": "draft",
            "parent_id": None, "sibling_group": f"{task}-r{rnd}-g0", "plan": "add a round",
            "code": "print(1)", "status": "ok" if ok else "crashed", "exc_type": None if ok else "ValueError",
            "reward": 0.5 if ok else -0.5, "is_buggy": not ok, "source": "grade" if ok else "exec",
            "test_metric": 0.5 if ok else None, "oriented": 0.5 if ok else None,
            "response_token_ids": [1, 2, 3], "response_logprobs": [-0.1, -0.1, -0.1],
            "prompt_messages": [{"role": "user", "content": "solve"}], "term_tail": "done"}
