import pytest
import torch

from learn_helpers import one_thread, random_samples, tiny_policy  # noqa: F401 (autouse)
from train.learn.gates import HealthGateError
from train.learn.lora import make_optimizer
from train.learn.session import after_commit
from train.learn.step import StepConfig, grpo_step
from train.learn.timing import PhaseTimer
from warehouse.db import connect


def _ok_round(con, run_id, round_no, ok=True):
    line = con.execute('SELECT count(*) FROM "nodes"').fetchone()[0] + 1
    con.execute('INSERT INTO "nodes" ("source_id", "line_no", "run_id", "round", "task", "node_id", '
                '"status", "reward") VALUES (9, ?, ?, ?, \'t\', ?, ?, ?)',
                [line, run_id, round_no, f"n{line}", "ok" if ok else "crashed", 0.5 if ok else -0.5])


def _step_metrics(seed: int = 0) -> dict:
    torch.manual_seed(seed)
    policy = tiny_policy(checkpointing=False)
    return grpo_step(policy, make_optimizer(policy, 1e-2), random_samples(4, seed=seed),
                     StepConfig(token_budget=64), PhaseTimer())


def _commit_metrics(db_url, run_id, step, metrics):
    from ingest.records import load_step_metrics
    from train.learn.store import step_metrics_record

    with connect(db_url) as con:
        load_step_metrics(con, run_id, [step_metrics_record(step, metrics)],
                          source_path=f"train://{run_id}/round_{step}/step_metrics")


def test_the_step_metrics_record_lands_and_after_commit_gates_the_first_step(db_url):
    lines = []
    with connect(db_url) as con:
        _ok_round(con, "good", 1)
        _ok_round(con, "good", 2)
    metrics = _step_metrics()
    for step in (1, 2):
        _commit_metrics(db_url, "good", step, metrics)
    after_commit(db_url, "good", 1, health_gate=True, decision_steps=(2,), log=lines.append)
    after_commit(db_url, "good", 2, health_gate=False, decision_steps=(2,), log=lines.append)
    assert lines[0].startswith("Health gate passed")
    assert lines[1].startswith("Decision rule at step 2: 0 of 1 tasks moved")
    with connect(db_url, read_only=True) as con:
        tokens = sum(len(s.response_ids) for s in random_samples(4))
        assert con.execute('SELECT "step", "tokens" FROM "step_metrics" WHERE "run_id" = \'good\' '
                           'ORDER BY "step"').fetchall() == [(1, tokens), (2, tokens)]


def test_a_failing_health_gate_stops_unless_turned_off(db_url):
    with connect(db_url) as con:
        _ok_round(con, "bad", 1, ok=False)
    with pytest.raises(HealthGateError, match="--no-health-gate"):
        after_commit(db_url, "bad", 1, health_gate=True)
    after_commit(db_url, "skipping", 1, health_gate=False)  # no gate, no error
