"""Every `train run` can resume: with no checkpoint option a run keeps its checkpoints in the
per-user data directory (the last KEEP_STEPS steps), and `--resume-from RUN` continues an
interrupted run at its latest step with its learning: the resumed step is the step the run
would have taken, against a run of the same settings that was never stopped."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from tests.train.test_run import TASK, CannedBackend, model_dir  # noqa: F401 - shared fixtures
from train.generate.base import completion_from_tokens, plan_prompts
from tests.train.rollout.conftest import tiny_model, tiny_tokenizer  # noqa: F401 - shared fixtures
from train.learn.checkpoint import KEEP_STEPS, default_root, saved_steps
from warehouse.db import connect


def _args(db_url: str, model_dir, run_id: str, rounds: int, *more: str) -> list[str]:
    return ["run", "--model", str(model_dir), "--rounds", str(rounds), "--tasks", TASK,
            "--db", db_url.removeprefix("duckdb:///"), "--set", "siblings_per_expansion=2",
            "--set", "learning_rate=0.01", "--no-health-gate", "--quiet", "--run-id", run_id, *more]


def _steps(db_url: str, run_id: str) -> dict[int, tuple]:
    with connect(db_url, read_only=True) as con:
        rows = con.execute("SELECT step, loss, kl, grad_norm FROM step_metrics WHERE run_id = ? ORDER BY step",
                           [run_id]).fetchall()
    return {row[0]: row[1:] for row in rows}


class LearningBackend(CannedBackend):
    """CannedBackend's scripts, with the crashing (odd) siblings' response tokens other than the valid
    ones'. With one token sequence for every sibling, a group's advantages (summing to zero) cancel
    in the gradient, and whether step 1 moved the adapter at all was left to rounding."""

    def generate(self, requests, sampling):
        out = super().generate(requests, sampling)
        plans = plan_prompts(self.tokenizer, requests, sampling)
        for request, plan, completions in zip(requests, plans, out):
            for i, completion in enumerate(completions):
                if i % 2:
                    text = completion.raw_completion
                    completions[i] = completion_from_tokens(self.tokenizer, request.messages, plan.token_ids,
                                                            [4, 5, 6], [-0.5, -0.5, -0.5])
                    completions[i].raw_completion = text
        return out


@pytest.fixture
def canned(monkeypatch):
    monkeypatch.setattr("train.factories.make_backend",
                        lambda opts, arm, knobs, policy: LearningBackend(policy.tokenizer))


def test_an_interrupted_default_run_resumes_from_its_latest_step_with_its_learning(db_url, model_dir, canned,
                                                                                    monkeypatch):
    import train.run
    from train.cli import main

    whole = CliRunner().invoke(main, _args(db_url, model_dir, "whole", 2))
    assert whole.exit_code == 0, whole.output

    run_round = train.run.run_round

    def ctrl_c_in_round_2(round_no, *args):
        if round_no == 2:
            raise KeyboardInterrupt
        return run_round(round_no, *args)

    monkeypatch.setattr(train.run, "run_round", ctrl_c_in_round_2)
    stopped = CliRunner().invoke(main, _args(db_url, model_dir, "stopped", 2))
    assert stopped.exit_code == 130 and stopped.output.strip().endswith("Interrupted."), stopped.output
    assert saved_steps(default_root(), "stopped") == [1]  # no --checkpoint-dir given: the default keeps it
    monkeypatch.setattr(train.run, "run_round", run_round)

    resumed = CliRunner().invoke(main, _args(db_url, model_dir, "resumed", 1, "--resume-from", "stopped"))
    assert resumed.exit_code == 0, resumed.output
    with connect(db_url, read_only=True) as con:
        assert con.execute("SELECT resumed_from_run, resumed_from_step FROM runs WHERE run_id = 'resumed'"
                           ).fetchone() == ("stopped", 1)
    assert list(_steps(db_url, "resumed")) == [2]
    assert _steps(db_url, "whole")[2][1] > 0  # step 2 starts away from the reference: step 1 learned
    assert _steps(db_url, "resumed")[2] == pytest.approx(_steps(db_url, "whole")[2], rel=1e-4)


def test_a_run_keeps_only_its_newest_checkpoints(db_url, model_dir, canned, tmp_path):
    from train.cli import main

    result = CliRunner().invoke(main, _args(db_url, model_dir, "long", KEEP_STEPS + 2,
                                            "--checkpoint-dir", str(tmp_path / "ckpt")))
    assert result.exit_code == 0, result.output
    assert saved_steps(tmp_path / "ckpt", "long") == list(range(3, KEEP_STEPS + 3))


def test_resume_without_a_checkpoint_says_what_to_pass(db_url, model_dir, canned, tmp_path):
    from train.cli import main

    first = CliRunner().invoke(main, _args(db_url, model_dir, "rollouts", 1, "--no-learn"))
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(main, _args(db_url, model_dir, "again", 1, "--resume-from", "rollouts"))
    assert again.exit_code == 1
    assert again.output.strip().splitlines()[-1].startswith("Error: --resume-from rollouts: no checkpoint of run")
    assert "--no-learn --resume-from rollouts:1" in again.output
