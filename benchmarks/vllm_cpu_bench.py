"""vLLM on CPU against our transformers backend, tiny policy: start-up, one round's generation,
and the greedy logprob agreement. Runs in the vLLM venv (README, "--backend vllm"):

    TRAIN_TINY_POLICY_DIR=~/.cache/rollout-warehouse/tiny-policy .venv-vllm/bin/python benchmarks/vllm_cpu_bench.py

- `start_s`: `VLLMBackend(...)` until it can generate (engine process spawned, model loaded,
  KV cache allocated), eager mode, fp32;
- `round_gen_s`: the tiny arm's first round, 4 bundled tasks x 16 siblings of the draft prompt,
  temperature 1, response cap 256 (what `train run --model tiny` asks for), for vLLM and for
  the transformers backend in the same run; tokens/s = generated tokens / seconds;
- `greedy_max_logprob_gap`: max |logprob(vLLM) - logprob(transformers)| over greedy completions
  of the same prompts (48 tokens each), with the tokens compared too.
Wall-clock figures on a shared 2-core machine follow its load: compare the two backends' ratio.
"""
from __future__ import annotations

import json
import time

from train.env.tasks import bundled_task_names, load_task
from train.generate.base import GenRequest, SamplingConfig
from train.generate.hf import HFBackend
from train.generate.vllm_backend import VLLMBackend
from train.policy.loader import load_policy
from train.rollout.prompts import draft_messages
from train.tiny.policy import resolve_model_path


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def tokens(batches) -> int:
    return sum(len(c.response_token_ids) for per in batches for c in per)


def main() -> None:
    path = resolve_model_path("tiny")
    policy = load_policy(str(path), "cpu")
    prompts = [draft_messages(load_task(name).description) for name in bundled_task_names()]
    vllm, start_s = timed(lambda: VLLMBackend(str(path), policy.tokenizer, max_model_len=4096, device="cpu"))
    hf = HFBackend(policy.model, policy.tokenizer)
    result = {"start_s": round(start_s, 1)}
    round_sampling = SamplingConfig(max_new_tokens=256, total_cap=4096, temperature=1.0, seed=0)
    for name, backend in (("vllm", vllm), ("hf", hf)):
        out, seconds = timed(lambda: backend.generate([GenRequest(m, 16) for m in prompts], round_sampling))
        result[f"round_gen_s_{name}"] = round(seconds, 1)
        result[f"round_tokens_{name}"] = tokens(out)
        result[f"round_tokens_per_s_{name}"] = round(tokens(out) / seconds, 1)
    greedy = SamplingConfig(max_new_tokens=48, total_cap=4096, temperature=0.0)
    ours, theirs = hf.generate([GenRequest(m, 1) for m in prompts], greedy), vllm.generate(
        [GenRequest(m, 1) for m in prompts], greedy)
    pairs = [(a[0], b[0]) for a, b in zip(ours, theirs)]
    result["greedy_tokens_equal"] = all(a.response_token_ids == b.response_token_ids for a, b in pairs)
    result["greedy_max_logprob_gap"] = max(abs(x - y) for a, b in pairs
                                           for x, y in zip(a.response_logprobs, b.response_logprobs))
    vllm.close()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":  # vLLM spawns its engine process, which re-imports this module
    main()
