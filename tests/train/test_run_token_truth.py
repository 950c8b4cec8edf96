"""Token-level truth in `train run`: the learner's logprob beside the sampler's on every trained
token, the weights that wrote each node, and the step-1 gate on their disagreement.

The transformers backend generates real tokens and logprobs with the 2-layer policy; each
completion's text is then a canned script (valid for even siblings, crashing for odd ones, as in
tests/train/test_run.py), so the round has ok nodes and the health gate judges the logprobs.
"""
from __future__ import annotations

import copy

import pytest
from click.testing import CliRunner

from tests.train.rollout.conftest import tiny_model, tiny_tokenizer  # noqa: F401 - shared fixtures
from tests.train.test_run import BAD, GOOD, TASK
from train.generate.hf import HFBackend
from warehouse.cli import main as warehouse_main

SETS = ["--set", "siblings_per_expansion=2", "--set", "response_cap=6", "--set", "draft_prob=0"]


class ScriptedHF(HFBackend):
    """The transformers backend's tokens and logprobs; a canned script as each completion's text."""

    def generate(self, requests, sampling, indices=None, on_request=None):
        out = super().generate(requests, sampling, indices)
        for batch in out:
            for i, completion in enumerate(batch):
                completion.raw_completion = f"Plan.\n\n```python\n{GOOD if i % 2 == 0 else BAD}\n```"
        return out


def same_weights(opts, arm, knobs, policy):
    return ScriptedHF(policy.model, policy.tokenizer, paged=False)


def other_weights(opts, arm, knobs, policy):
    """The planted disagreement: the engine serves a perturbed copy, not the learner's weights."""
    import torch

    served = copy.deepcopy(policy.model)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in served.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * 0.5)
    return ScriptedHF(served, policy.tokenizer, paged=False)


@pytest.fixture
def model_dir(tmp_path, tiny_model, tiny_tokenizer):
    path = tmp_path / "model"
    tiny_model.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


def train_run(db_url, model_dir, tmp_path, *extra):
    from train.cli import main

    return CliRunner().invoke(main, ["run", "--model", str(model_dir), "--tasks", TASK, "--db", db_url,
                                     "--device", "cpu", "--checkpoint-dir", str(tmp_path / "ckpt"), *SETS, *extra])


def test_every_trained_token_has_the_trainers_logprob_and_every_node_its_weights(
        db_url, model_dir, tmp_path, monkeypatch):
    from warehouse.db import connect

    monkeypatch.setattr("train.factories.make_backend", same_weights)
    result = train_run(db_url, model_dir, tmp_path, "--rounds", "2", "--run-id", "truth")
    assert result.exit_code == 0, result.output
    assert "Health gate passed" in result.output
    with connect(db_url, read_only=True) as con:
        versions = con.execute('SELECT "round", list(DISTINCT "policy_version"), count(*) FROM "nodes" '
                               'GROUP BY ALL ORDER BY 1').fetchall()
        tokens = con.execute('SELECT count(*), count("trainer_logprob"), count("ref_logprob"), '
                             'max(abs("trainer_logprob" - "logprob")) FROM "node_tokens"').fetchone()
        ratios = con.execute('SELECT list_min(t."ratios"), list_max(t."ratios"), len(t."ratios"), '
                             'n."n_response_tokens", t."step" = n."round" FROM "node_train_tokens" t '
                             'JOIN "nodes" n USING ("source_id", "line_no")').fetchall()
        mismatch = con.execute('SELECT "round", "mult_prob_error" FROM "round_metrics" ORDER BY 1').fetchall()
    assert [(r, v) for r, v, _ in versions] == [(1, [0]), (2, [1])]  # round 2 sampled step 1's weights
    assert tokens[0] > 0 and tokens[0] == tokens[1] == tokens[2]  # every token of every node trained
    assert tokens[3] < 1e-3  # the same float32 weights: the sampler's logprobs are the learner's
    # the first epoch's ratio is the update's own forward over old_log_prob: 1 up to float error
    assert all(abs(lo - 1) < 1e-3 and abs(hi - 1) < 1e-3 and n == m and same for lo, hi, n, m, same in ratios)
    assert [r for r, _ in mismatch] == [1, 2] and all(1.0 <= e < 1.001 for _, e in mismatch)
    shown = CliRunner().invoke(warehouse_main, ["--db", db_url, "metrics", "--view", "logprob_mismatch",
                                                "--run", "truth", "--format", "csv"])
    assert shown.exit_code == 0, shown.output
    head, *lines = shown.output.strip().splitlines()
    assert head.startswith("run_id,round,task,trained_nodes,trained_tokens,compared_tokens,mult_prob_error,")
    assert [line.split(",")[1] for line in lines] == ["1", "2"]


def test_an_engine_serving_other_weights_fails_the_gate_at_step_1(db_url, model_dir, tmp_path, monkeypatch):
    from warehouse.db import connect

    monkeypatch.setattr("train.factories.make_backend", other_weights)
    result = train_run(db_url, model_dir, tmp_path, "--rounds", "2", "--run-id", "planted")
    assert result.exit_code != 0
    line = result.output.strip().splitlines()[-1]
    assert line.startswith("Error: health gate failed after step 1 of run planted: the sampler's and the "
                           "trainer's logprobs disagree (mini-tabular-accuracy: mult_prob_error "), result.output
    assert "Likely causes:" in line and "serves other weights" in line and "stale LoRA adapter" in line
    with connect(db_url, read_only=True) as con:
        rounds = con.execute('SELECT "round", "mult_prob_error" FROM "round_metrics"').fetchall()
    assert len(rounds) == 1 and rounds[0][1] > 1.1  # the run stopped after its first round
    checked = CliRunner().invoke(warehouse_main, ["--db", db_url, "check", "--run", "planted", "--suite", "mismatch"])
    assert checked.exit_code == 1, checked.output
    assert ('FAILED: 2 of 2 expectations (invariants 16). Every offending row: warehouse sql '
            '"SELECT * FROM logprob_mismatch"') in checked.output


def test_limits_set_for_the_run_let_the_planted_run_through(db_url, model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("train.factories.make_backend", other_weights)
    result = train_run(db_url, model_dir, tmp_path, "--rounds", "1", "--run-id", "loose",
                       "--set", "mismatch_max=1e9", "--set", "mismatch_share_gt1_max=1")
    assert result.exit_code == 0, result.output
    assert "Health gate passed" in result.output


def test_a_diverged_steps_nan_lands_as_null_and_the_node_stays(db_url):
    """A NaN in a record would make its JSON line invalid and cost the node."""
    from types import SimpleNamespace

    from train.learn.step import TokenRecord
    from train.learn.learner import record_round
    from train.writer import RoundWrite, RunRow, commit_round
    from warehouse.db import connect

    record = {"id": "n1", "step": 0, "parent_id": None, "sibling_group": "g", "mode": "draft", "status": "ok",
              "reward": 0.5, "response_token_ids": [1, 2], "response_logprobs": [-0.5, -0.5]}
    result = SimpleNamespace(records={TASK: [record]}, completions={TASK: [object()]})
    record_round(result, 2, [TokenRecord([-0.5, float("nan")], [-0.5, float("-inf")], [1.0, 1.0], float("nan"))], 3)
    commit_round(db_url, RunRow("nan_run", None, None, "test", 0), RoundWrite(3, {TASK: [record]}, {TASK: None}))
    with connect(db_url, read_only=True) as con:
        node = con.execute('SELECT "policy_version", json_keys("extra") FROM "nodes"').fetchall()
        trained = con.execute('SELECT "trainer_logprobs", "ref_logprobs", "advantage", "compared_tokens" '
                              'FROM "node_train_tokens"').fetchall()
    assert node == [(2, ["trainer_logprobs", "ref_logprobs"])]  # the lists with a null, also kept verbatim
    assert trained == [([-0.5, None], [-0.5, None], None, 1)]
