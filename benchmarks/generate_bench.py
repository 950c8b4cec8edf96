"""Generation on a round's shape: vLLM (the GPU default) against our paged generator, same GPU.

The arm mix is a round as the arms run it: 64 rows = 4 tasks x 16 siblings sharing 4 prompts of
1,000 to 12,000 tokens (a randomly initialised Qwen3-1.7B or Qwen3-8B shape, `--vocab`), each
row's completion length drawn lognormal (median 3,000, sigma set so that 10% reach the cap),
clipped to the cap and FORCED (no EOS; each row stops at its drawn length), so every method
generates exactly the same tokens. Methods, at each cap of `--caps`:
- `paged`: the hf backend's paged KV cache + continuous batching (train.generate.paged), the
  pool sized by `--gpu-memory-utilization`; its logprobs are checked against one uncached
  forward over a few rows (a wrong cache shows);
- `vllm`: vLLM's engine as `train run` starts it (train.generate.vllm_backend: in this process,
  prefix caching, bf16, the same `gpu_memory_utilization`), one request per row with its forced
  length (`min_tokens = max_tokens`, EOS ignored);
- `vllm_lora`: the same engine with LoRA enabled and a rank-32 all-linear adapter (random B)
  served on every row: what each decode step costs when the policy is served as an adapter
  (`--set vllm_weight_sync=lora`) instead of merged weights;
- `generate_batch`: transformers' own continuous batching (`paged|sdpa`).
Each method runs in a process of its own (one GPU, one method at a time: vLLM holds its memory
until its process ends), all loading the same saved random model (`--model-dir`, built once),
and the results are merged into one JSON. Each reports tokens/s (generated tokens / wall seconds
of the call, prefill included) and its share of the memory-bandwidth bound of the mix: per
decode step, the weight bytes plus the live KV bytes of every running row (prompt + tokens so
far), summed over the steps of the ideal schedule (every row from step 0), at `--bandwidth`
bytes/s; `vllm_over_paged@CAP` and `lora_decode_cost@CAP` are the ratios in the same call.

    PYTHONPATH=. python3 benchmarks/generate_bench.py --size 1.7b --vocab 2048 \
        --caps 4096,24576,32768 --methods paged,vllm,vllm_lora --out arm_mix.json

(The static path, one left-padded batch over a compiled static cache, was removed after it lost
to the paged path by 8x or more and to vLLM everywhere; its figures stay in RESULTS.md.)
"""
from __future__ import annotations

import argparse
import json
import time
import traceback


def qwen3_like(size: str, vocab: int = 151936, positions: int = 8192):
    from transformers import Qwen3Config

    shapes = {
        "1.7b": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                     num_key_value_heads=8, head_dim=128),
        "8b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                   num_key_value_heads=8, head_dim=128),
        "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16),
    }[size]
    return Qwen3Config(vocab_size=vocab, max_position_embeddings=positions, tie_word_embeddings=size != "8b",
                       rope_theta=1_000_000, **shapes)


def build_model(size: str, device: str, vocab: int = 151936, positions: int = 8192):
    import torch
    from transformers import Qwen3ForCausalLM

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    with torch.device(device):
        torch.set_default_dtype(dtype)
        model = Qwen3ForCausalLM(qwen3_like(size, vocab, positions))
        torch.set_default_dtype(torch.float32)
    model.generation_config.eos_token_id = None  # rows never stop early: equal work per method
    model.generation_config.pad_token_id = 0
    return model.eval()


def sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn) -> float:
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def measure(name: str, fn, tokens: int, results: dict) -> None:
    try:
        seconds = timed(fn)
        results[name] = {"seconds": round(seconds, 3), "tokens_per_s": round(tokens / seconds, 1)}
    except Exception as exc:  # noqa: BLE001 - a benchmark reports every method it can
        results[name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        traceback.print_exc()
    print(name, results[name], flush=True)


# --- the arm mix ---------------------------------------------------------------------------


def arm_mix(cap: int, seed: int = 0, tasks: int = 4, siblings: int = 16, vocab: int = 2048):
    """(prompts, lengths): `tasks` prompts of 1,000-12,000 tokens, each for `siblings` rows, and
    each row's forced completion length (lognormal, median 3,000, 10% at the cap)."""
    import math

    import numpy as np

    from train.generate.lengths import ARM_MEDIAN, MIN_LENGTH, arm_sigma

    rng = np.random.default_rng(seed)
    prompt_lengths = rng.integers(1000, 12001, tasks)
    prompts = [rng.integers(3, vocab, n).tolist() for n in prompt_lengths]
    # the arm mix of train.generate.lengths (`--set bench_lengths=arm`): P(L > cap) = 10%
    lengths = np.clip(rng.lognormal(math.log(ARM_MEDIAN), arm_sigma(cap), tasks * siblings), MIN_LENGTH,
                      cap).astype(int).tolist()
    rows = [prompts[i // siblings] for i in range(tasks * siblings)]
    return rows, lengths


def bandwidth_bound(model, prompts, lengths, bandwidth: float) -> dict:
    """Seconds and tokens/s if every decode step only streamed weights + live KV at `bandwidth`."""
    import numpy as np

    config = model.config
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    kv_per_token = (2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim
                    * next(model.parameters()).element_size())
    prompt_len = np.array([len(p) for p in prompts])
    lengths = np.array(lengths)
    steps = int(lengths.max())
    total = 0.0
    for t in range(steps):  # step t feeds token t of every row still running (the first comes from prefill)
        alive = lengths > t + 1
        if alive.any():
            total += weight_bytes + kv_per_token * float((prompt_len[alive] + t + 1).sum())
    seconds = total / bandwidth
    return {"seconds": round(seconds, 2), "tokens_per_s": round(int(lengths.sum()) / seconds, 1),
            "weight_gb": round(weight_bytes / 1e9, 2), "kv_bytes_per_token": kv_per_token}


def paged_run(model, prompts, lengths, utilization: float, out: dict, lookahead: int | None = None):
    from train.generate.base import SamplingConfig
    from train.generate.paged import PagedGenerator, kv_blocks_for

    if next(model.parameters()).is_cuda:
        blocks = kv_blocks_for(model, utilization)
    else:  # a CPU smoke run: room for every row
        blocks = 1 + sum(-(-(len(p) + n) // 16) for p, n in zip(prompts, lengths))
    generator = PagedGenerator(model, [], num_blocks=blocks, lookahead=lookahead)
    start, last = time.perf_counter(), [0.0]

    def progress(generated: int, running: int, waiting: int) -> None:
        # a line every 10 s: a run cut off by the call's limit still shows its rate
        now = time.perf_counter() - start
        if now - last[0] >= 10:
            last[0] = now
            print(f"  paged {now:6.1f} s: {generated:,} tokens ({generated / now:,.0f} tok/s), "
                  f"{running} running, {waiting} waiting, {len(generator.graphs)} graphs, "
                  f"{generator.preemptions} preemptions", flush=True)

    got = generator.generate(prompts, lengths, SamplingConfig(max_new_tokens=max(lengths), seed=0),
                             progress=progress)
    assert [len(t) for t, _ in got] == list(lengths), "every row must generate exactly its forced length"
    out.update(kv_blocks=blocks, preemptions=generator.preemptions, result=got)


def generate_batch_run(model, prompts, lengths):
    """transformers' continuous batching (its manager, `paged|sdpa`), each request with its own
    max_new_tokens and no EOS: the same forced lengths."""
    from transformers import GenerationConfig

    config = GenerationConfig(max_new_tokens=max(lengths), do_sample=True, eos_token_id=None, pad_token_id=0)
    manager = model.init_continuous_batching(generation_config=config)
    manager.start()
    try:
        for prompt, n in zip(prompts, lengths):
            manager.add_request(prompt, max_new_tokens=int(n))
        done = 0
        while done < len(prompts):
            result = manager.get_result(timeout=1)
            if result is not None and result.is_finished():
                done += 1
            elif result is None and not manager.is_running():
                raise RuntimeError(f"transformers' continuous batching stopped after {done} of {len(prompts)} rows")
    finally:
        manager.stop(block=True)


def paged_logprob_check(model, prompts, result, rows=(0, -1), tail: int = 512) -> dict:
    """|paged logprob - an uncached forward's| over the last `tail` tokens of a few rows."""
    import torch

    diffs = []
    with torch.inference_mode():
        for row in rows:
            ids, lps = result[row]
            keep = min(tail, len(ids))
            seq = torch.tensor(prompts[row] + ids, device=next(model.parameters()).device)[None]
            logits = model(input_ids=seq, logits_to_keep=keep + 1).logits[0, :-1].float()  # (keep, V)
            full = torch.log_softmax(logits, -1).gather(-1, seq[0, -keep:, None])[:, 0]
            diffs.append((full - torch.tensor(lps[-keep:], device=full.device)).abs())
    diffs = torch.cat(diffs)
    return {"mean_abs": round(diffs.mean().item(), 4), "max_abs": round(diffs.max().item(), 4)}


def saved_model(args) -> str:
    """The random model of `--size` saved under `--model-dir` (built on first use), so every
    method's process loads the same weights."""
    from pathlib import Path

    import torch

    target = Path(args.model_dir or f"/tmp/generate_bench_{args.size}_{args.vocab}")
    if not (target / "config.json").is_file():
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = build_model(args.size, device, args.vocab, positions=max(int(c) for c in args.caps.split(",")) + 12_288)
        model.save_pretrained(target)
        del model
        if device == "cuda":
            torch.cuda.empty_cache()  # the methods' processes need the GPU
    return str(target)


def load_saved(model_dir: str, device: str):
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model.eval()


def random_adapter(model_dir: str, target: str) -> str:
    """A rank-32 all-linear LoRA adapter of the saved model (as the arms train it), B random so
    it changes every output; built on the CPU, saved with peft's save_pretrained."""
    from pathlib import Path

    import torch

    if (Path(target) / "adapter_config.json").is_file():
        return target
    from train.policy.lora import add_lora

    model = add_lora(load_saved(model_dir, "cpu").to(torch.bfloat16), 32, 32)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.01)
    model.save_pretrained(target)
    return target


def vllm_engine(model_dir: str, max_model_len: int, utilization: float, lora: str | None = None):
    """vLLM's engine as train.generate.vllm_backend starts it (in this process, prefix caching,
    bf16), with LoRA enabled when an adapter is to be served."""
    import os

    from vllm import LLM

    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # train run's merged-weights engine runs in its process
    extra = {"enable_lora": True, "max_lora_rank": 32} if lora else {}
    return LLM(model=model_dir, skip_tokenizer_init=True, dtype="bfloat16", gpu_memory_utilization=utilization,
               max_model_len=max_model_len, enable_prefix_caching=True, seed=0, **extra)


def vllm_generate(llm, prompts, lengths, lora: str | None = None) -> float:
    """Seconds for the mix, each row forced to its length."""
    from vllm import SamplingParams

    request = None
    if lora:
        from vllm.lora.request import LoRARequest

        request = LoRARequest("policy-1", 1, lora)
    params = [SamplingParams(n=1, temperature=1.0, max_tokens=int(n), min_tokens=int(n), ignore_eos=True,
                             logprobs=0, seed=k, detokenize=False) for k, n in enumerate(lengths)]
    sync()
    start = time.perf_counter()
    outputs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, lora_request=request, use_tqdm=False)
    sync()
    seconds = time.perf_counter() - start
    assert [len(o.outputs[0].token_ids) for o in outputs] == list(lengths), "every row must generate its forced length"
    return seconds


def run_vllm_method(args, results: dict, method: str) -> None:
    """One vLLM method at every cap, one engine for all (sized for the largest), in this process."""
    caps = [int(c) for c in args.caps.split(",")]
    lora = random_adapter(args.model_dir, args.model_dir.rstrip("/") + "_adapter") if method == "vllm_lora" else None
    mixes = {cap: arm_mix(cap, vocab=args.vocab) for cap in caps}
    longest = max(len(p) + n for prompts, lengths in mixes.values() for p, n in zip(prompts, lengths))
    start = time.perf_counter()
    llm = vllm_engine(args.model_dir, longest, args.gpu_memory_utilization, lora)
    results[f"{method}_engine_start_s"] = round(time.perf_counter() - start, 1)
    print(f"{method}: engine started in {results[f'{method}_engine_start_s']} s", flush=True)
    for cap, (prompts, lengths) in mixes.items():
        try:
            seconds = vllm_generate(llm, prompts, lengths, lora)
            entry = {"seconds": round(seconds, 3), "tokens_per_s": round(sum(lengths) / seconds, 1)}
        except Exception as exc:  # noqa: BLE001 - a benchmark reports every method it can
            traceback.print_exc()
            entry = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        results[f"{method}@{cap}"] = entry
        print(f"{method}@{cap}", entry, flush=True)
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(results, fh, indent=1)


def spawn_methods(args, results: dict) -> None:
    """Each method of `--methods` in a process of its own, merged into `results`."""
    import os
    import subprocess
    import sys
    import tempfile

    args.model_dir = saved_model(args)
    for method in args.methods.split(","):
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
            part = tmp.name
        command = [sys.executable, __file__, "--size", args.size, "--vocab", str(args.vocab),
                   "--caps", args.caps, "--methods", method, "--gpu-memory-utilization", str(args.gpu_memory_utilization),
                   "--bandwidth", str(args.bandwidth), "--model-dir", args.model_dir, "--child", "--out", part]
        if args.lookahead is not None:
            command += ["--lookahead", str(args.lookahead)]
        print("::", " ".join(command), flush=True)
        done = subprocess.run(command, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            with open(part) as fh:
                child = json.load(fh)
        except (OSError, ValueError):
            child = {}
        results.update({k: v for k, v in child.items() if "@" in k or k.endswith("_engine_start_s")})
        results[f"{method}_exit_code"] = done.returncode
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(results, fh, indent=1)
    for key in [k for k in results if k.startswith(("paged@", "vllm@", "vllm_lora@"))]:
        bound = results.get("bound@" + key.split("@")[1], {})
        if "tokens_per_s" in results[key] and bound.get("tokens_per_s"):
            results[key]["of_bound"] = round(results[key]["tokens_per_s"] / bound["tokens_per_s"], 3)
    for cap in args.caps.split(","):
        paged, vllm = results.get(f"paged@{cap}", {}), results.get(f"vllm@{cap}", {})
        if paged.get("tokens_per_s") and vllm.get("tokens_per_s"):
            results[f"vllm_over_paged@{cap}"] = round(vllm["tokens_per_s"] / paged["tokens_per_s"], 3)
        lora = results.get(f"vllm_lora@{cap}", {})
        if lora.get("tokens_per_s") and vllm.get("tokens_per_s"):
            results[f"lora_decode_cost@{cap}"] = round(vllm["tokens_per_s"] / lora["tokens_per_s"], 3)


def mix_and_bounds(args, results: dict) -> None:
    """The workload and its bandwidth bound at every cap (from the config: no GPU needed)."""
    import torch
    from transformers import Qwen3ForCausalLM

    with torch.device("meta"):
        torch.set_default_dtype(torch.bfloat16)
        model = Qwen3ForCausalLM(qwen3_like(args.size, args.vocab))
        torch.set_default_dtype(torch.float32)
    results["params_b"] = round(sum(p.numel() for p in model.parameters()) / 1e9, 3)
    for cap in [int(c) for c in args.caps.split(",")]:
        prompts, lengths = arm_mix(cap, vocab=args.vocab)
        results[f"mix@{cap}"] = {"rows": len(prompts), "prompt_tokens": sorted({len(p) for p in prompts}),
                                 "generated_tokens": sum(lengths), "median_length": sorted(lengths)[len(lengths) // 2],
                                 "at_cap": sum(n == cap for n in lengths), "longest": max(lengths)}
        results[f"bound@{cap}"] = bandwidth_bound(model, prompts, lengths, args.bandwidth)
        print(f"mix@{cap}", results[f"mix@{cap}"], "bound", results[f"bound@{cap}"], flush=True)


def run_arm_mix(args, results: dict) -> None:
    """The parent: the mix and its bounds, then each method in its own process. A child: one
    method at every cap."""
    if not args.child:
        mix_and_bounds(args, results)
        return spawn_methods(args, results)
    if args.methods in ("vllm", "vllm_lora"):
        return run_vllm_method(args, results, args.methods)
    run_torch_method(args, results, args.methods)


def run_torch_method(args, results: dict, method: str) -> None:
    """`paged` or `generate_batch` at every cap, on the saved model, in this process."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = load_saved(args.model_dir, device)
    for cap in [int(c) for c in args.caps.split(",")]:
        prompts, lengths = arm_mix(cap, vocab=args.vocab)
        if device == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        info: dict = {}
        fn = {"paged": lambda: paged_run(model, prompts, lengths, args.gpu_memory_utilization, info, args.lookahead),
              "generate_batch": lambda: generate_batch_run(model, prompts, lengths)}[method]
        measure(f"{method}@{cap}", fn, sum(lengths), results)
        entry = results[f"{method}@{cap}"]
        if device == "cuda":
            entry["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
        entry.update({k: v for k, v in info.items() if k != "result"})
        print(f"{method}@{cap}", entry, flush=True)
        if "result" in info:  # the paged path's logprobs against one uncached forward (a wrong cache shows)
            results[f"paged_logprob_check@{cap}"] = paged_logprob_check(model, prompts, info.pop("result"))
            print(f"paged_logprob_check@{cap}", results[f"paged_logprob_check@{cap}"], flush=True)
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(results, fh, indent=1)


def main() -> None:
    import torch
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1.7b", choices=["1.7b", "8b", "tiny"], help="tiny: a CPU smoke run")
    parser.add_argument("--vocab", type=int, default=2048)
    parser.add_argument("--caps", default="24576", help="response caps, a comma list")
    parser.add_argument("--methods", default="paged,vllm",
                        help="a comma list of paged, vllm, vllm_lora, generate_batch, each in its own process")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.6,
                        help="the paged pool's and vLLM's share of the GPU")
    parser.add_argument("--lookahead", type=int, default=None,
                        help="paged decode steps per host sync (default: train.generate.paged.LOOKAHEAD on GPU)")
    parser.add_argument("--bandwidth", type=float, default=4.8e12, help="bytes/s for the bound (H200)")
    parser.add_argument("--model-dir", default=None,
                        help="where the random model is saved (default /tmp/generate_bench_<size>_<vocab>)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one method, started by the parent
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    results = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
               "transformers": transformers.__version__, "workload": "arm_mix", **vars(args)}
    run_arm_mix(args, results)
    print(json.dumps(results, indent=1))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
