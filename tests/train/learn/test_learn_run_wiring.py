"""`train run` with learning: step_metrics rows, checkpoint interval, health gate, decision rule."""
import pytest

from tests.train.test_run import BAD, TASK, CannedBackend, model_dir, tiny_model, tiny_tokenizer  # noqa: F401
from train.learn.gates import HealthGateError
from train.run import run
from train.settings import RunOptions
from warehouse.db import connect


class CrashingBackend(CannedBackend):
    def generate(self, requests, sampling):
        out = super().generate(requests, sampling)
        for completions in out:
            for c in completions:
                c.raw_completion = f"Plan.\n\n```python\n{BAD}\n```"
        return out


# the canned backend's logprobs are made up (-0.5 for every token), so the gate's sampler-vs-trainer
# limits are lifted here (tests/train/test_run_token_truth.py tests that part of the gate)
UNJUDGED = {"mismatch_max": "1e9", "mismatch_share_gt1_max": "1"}


def _opts(db_url, model_dir, tmp_path, run_id, rounds, **kw) -> RunOptions:
    return RunOptions(model=str(model_dir), rounds=rounds, tasks=(TASK,), db_url=db_url, learn=True,
                      checkpoint_root=str(tmp_path / "ckpt"), sets={"siblings_per_expansion": "2", **UNJUDGED},
                      run_id=run_id, **kw)


def test_learning_run_writes_step_metrics_and_reads_its_gates(db_url, model_dir, monkeypatch, tmp_path):
    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer))
    said = []
    run(_opts(db_url, model_dir, tmp_path, "r_gates", 2, checkpoint_every=2, decision_steps=(2,)), log=said.append)
    with connect(db_url, read_only=True) as con:
        rows = con.execute('SELECT "step", "tokens", "micro_batches" FROM "step_metrics" '
                           'WHERE "run_id" = \'r_gates\' ORDER BY "step"').fetchall()
    assert rows == [(1, 6, 1), (2, 6, 1)]  # 2 siblings x 3 response tokens per round
    assert any(line.startswith("Health gate passed") for line in said)
    assert any(line.startswith("Decision rule at step 2: ") for line in said)
    assert [p.name for p in (tmp_path / "ckpt" / "r_gates").glob("global_step_*")] == ["global_step_2"]


def test_a_failed_health_gate_stops_the_run_unless_disabled(db_url, model_dir, monkeypatch, tmp_path):
    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CrashingBackend(policy.tokenizer))
    with pytest.raises(HealthGateError, match="run r_bad .*0 ok nodes.*--no-health-gate"):
        run(_opts(db_url, model_dir, tmp_path, "r_bad", 2), log=lambda line: None)
    report = run(_opts(db_url, model_dir, tmp_path, "r_bad2", 2, health_gate=False), log=lambda line: None)
    assert [r["round"] for r in report.rounds] == [1, 2]
    with connect(db_url, read_only=True) as con:
        assert con.execute('SELECT max("round") FROM "nodes" WHERE "run_id" = \'r_bad\'').fetchone() == (1,)
