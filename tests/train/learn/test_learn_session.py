import pytest
import torch

from learn_helpers import one_thread, random_samples, tiny_policy  # noqa: F401 (autouse)
from train.learn.gates import HealthGateError
from train.learn.session import Learner, LearnOptions
from train.learn.timing import PhaseTimer
from warehouse.db import connect


def _learner(tmp_path, run_id="run_a", **opts) -> Learner:
    options = LearnOptions(checkpoint_root=str(tmp_path / "ckpt"), **opts)
    return Learner.start(tiny_policy(checkpointing=False), run_id, lr=1e-2, total_cap=64, opts=options,
                         log=lambda line: None)


def _ok_round(con, run_id, round_no, ok=True):
    line = con.execute('SELECT count(*) FROM "nodes"').fetchone()[0] + 1
    con.execute('INSERT INTO "nodes" ("source_id", "line_no", "run_id", "round", "task", "node_id", '
                '"status", "reward") VALUES (9, ?, ?, ?, \'t\', ?, ?, ?)',
                [line, run_id, round_no, f"n{line}", "ok" if ok else "crashed", 0.5 if ok else -0.5])


def test_steps_checkpoint_every_n_and_resume_continues_the_numbering(tmp_path):
    torch.manual_seed(0)
    learner = _learner(tmp_path, checkpoint_every=2)
    for step in (1, 2):
        timer = PhaseTimer()
        learner.step(random_samples(4, seed=step), timer, step)
    assert "save_checkpoint" in timer.seconds  # step 2 saved, step 1 did not
    assert sorted(p.name for p in (tmp_path / "ckpt" / "run_a").iterdir()) == ["global_step_2"]

    resumed = _learner(tmp_path, run_id="run_b", resume_from="run_a:2")
    assert resumed.first_round(default=1) == 3
    trained = {n: p for n, p in learner.policy.named_parameters() if p.requires_grad}
    for name, p in resumed.policy.named_parameters():
        if p.requires_grad:
            assert torch.equal(p, trained[name])


def test_after_commit_writes_metrics_and_gates_the_first_step(tmp_path, db_url):
    learner = _learner(tmp_path, run_id="good", decision_steps=(2,))
    lines = []
    with connect(db_url) as con:
        _ok_round(con, "good", 1)
        _ok_round(con, "good", 2)
    learner.step(random_samples(4), PhaseTimer(), 1)
    learner.after_commit(db_url, 1, log=lines.append)
    learner.step(random_samples(4), PhaseTimer(), 2)
    learner.after_commit(db_url, 2, log=lines.append)
    assert lines[0].startswith("Health gate passed")
    assert lines[1].startswith("Decision rule at step 2: 0 of 1 tasks moved")
    with connect(db_url, read_only=True) as con:
        tokens = sum(len(s.response_ids) for s in random_samples(4))
        assert con.execute('SELECT "step", "tokens" FROM "step_metrics" ORDER BY "step"').fetchall() == [
            (1, tokens), (2, tokens)]

    failing = _learner(tmp_path, run_id="bad")
    with connect(db_url) as con:
        _ok_round(con, "bad", 1, ok=False)
    failing.step(random_samples(4), PhaseTimer(), 1)
    with pytest.raises(HealthGateError, match="--no-health-gate"):
        failing.after_commit(db_url, 1)
    skipping = _learner(tmp_path, run_id="bad", health_gate=False)
    skipping.step(random_samples(4), PhaseTimer(), 1)
    skipping.after_commit(db_url, 1)  # no error
