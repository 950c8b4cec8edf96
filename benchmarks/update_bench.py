"""update_actor throughput, MFU and peak memory: our GRPO update against plain transformers+peft.

Random-init Qwen3-like models (no downloads; speed does not depend on the values), LoRA r32
all-linear, bf16. Each measurement is one sequence of T tokens (the arm's "sequence of the
full total cap"), loss on every token.

* ours:  train.learn.step.grpo_step (old_log_prob, ref, adv, update_actor), packed SDPA
         attention, chunked fp32 log-probs over the vocab, gradient checkpointing; variants
         `full` (every layer checkpointed), `sac` (selective: attention outputs saved, so the
         recompute skips the attention kernel), `keepK` (the last K layers not checkpointed),
         `cudnn` (force the cuDNN SDPA backend), `gqa` (native GQA), `fused` (LoRA term added
         inside the second GEMM, train.learn.lora.fuse_lora), `normc` (compiled RMSNorms),
         `compile` (compiled MLPs and attention projections). `fused`, `normc` and `compile`
         patch the model for the rest of the process: list them last, after any plain run.
         `loop`: the update exactly as `train run` runs it (train.learn.learner.prepare_update and
         Learner.step with the default knobs): its first step keeps no layer and measures its
         peak, later steps keep what the device's free memory fits, norms compiled during the
         update; the row says the variant chosen. List it first or alone; it needs --warmup >= 1.
* plain: policy(input_ids, labels=input_ids).loss.backward() + AdamW step, gradient
         checkpointing on, the model's default (sdpa) attention.

MFU = model FLOPs / time / 989e12 (H200 dense bf16 peak), model FLOPs per step =
4 * N * T + 6 * n_layers * (n_heads * head_dim) * sum(L_i^2), N = all base parameters
(embeddings included, as in the issue's plain figure), L_i the packed sequence lengths
(causal attention: forward 2 L^2 d per layer, backward twice that). 4N, not 6N: the base is
frozen, so backward computes activation gradients only. Recompute is not counted.

Example (GPU):  python benchmarks/update_bench.py --configs 8b,1.5b --out results.jsonl
Example (CPU):  python benchmarks/update_bench.py --configs tiny --device cpu --tokens 64,128
The loop's own default (GPU):  python benchmarks/update_bench.py --configs 8b --tokens 36864 \
                    --ours-only-tokens "" --plain-tokens "" --variants loop --priority 36864
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

PEAK_BF16 = 989e12
QWEN3 = dict(head_dim=128, vocab_size=151936, rope_theta=1e6, max_position_embeddings=131072,
             rms_norm_eps=1e-6)
CONFIGS = {
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, vocab_size=256, max_position_embeddings=4096,
                 tie_word_embeddings=False),
    # Qwen2.5-1.5B's shape (1.54B parameters, tied embeddings)
    "1.5b": dict(QWEN3, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                 num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True),
    # Qwen3-8B's shape (8.19B parameters)
    "8b": dict(QWEN3, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
               num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False),
}


def build_policy(name: str, device: str, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM

    from train.policy.lora import add_lora

    try:
        from transformers import Qwen3Config as Config
    except ImportError:  # older transformers: Qwen2 has the same shape knobs
        from transformers import Qwen2Config as Config
    config = Config(**CONFIGS[name])
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config)
    finally:
        torch.set_default_dtype(previous)
    model.to(dtype)
    n_params = sum(p.numel() for p in model.parameters())
    return add_lora(model, rank=32, alpha=32), config, n_params


def model_flops(config, n_params: int, lengths) -> float:
    d_attn = config.num_attention_heads * config.head_dim
    return 4 * n_params * sum(lengths) + 6 * config.num_hidden_layers * d_attn * sum(L * L for L in lengths)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _reset_memory(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _peak_gib(device: str) -> float | None:
    return torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None


def _attention_backend(variant: str):
    """`cudnn` / `flash` in the variant's name: SDPA held to that backend (else its own choice,
    cuDNN on the H200)."""
    if "cudnn" not in variant and "flash" not in variant:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.CUDNN_ATTENTION if "cudnn" in variant else SDPBackend.FLASH_ATTENTION])


def _prepare(policy, mode: str, variant: str) -> None:
    from train.learn.packed_attention import set_native_gqa
    from train.learn.lora import prepare_for_training

    keep = int(variant.split("keep")[1].split("-")[0]) if "keep" in variant else 0
    prepare_for_training(policy, selective=(mode == "ours" and "sac" in variant), keep_layers=keep, fuse=False)
    set_native_gqa(mode == "ours" and "gqa" in variant)
    if mode == "ours" and "fused" in variant:
        from train.learn.lora import fuse_lora

        fuse_lora(policy)
    if mode == "ours" and "normc" in variant:
        _compile_norms(policy)
    if mode == "ours" and "compile" in variant:
        _compile_blocks(policy)


def _compile_norms(policy) -> None:
    """torch.compile every RMSNorm (fp32 upcast, square, mean, rsqrt, scale: one kernel)."""
    for module in policy.modules():
        if type(module).__name__.endswith("RMSNorm"):
            module.compile(dynamic=True)


def _compile_blocks(policy) -> None:
    """torch.compile each layer's MLP and attention projections (LoRA scale/add and SiLU*mul
    fuse); attention itself stays eager (a Python loop over packed sequences)."""
    from train.learn.logprobs import causal_lm

    for module in causal_lm(policy).modules():
        if type(module).__name__.endswith("DecoderLayer"):
            module.mlp.compile(dynamic=True)
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                getattr(module.self_attn, name).compile(dynamic=True)


def attention_bench(tokens: int, heads: int = 32, kv_heads: int = 8, dim: int = 128) -> list[dict]:
    """Causal SDPA forward+backward at one sequence of `tokens`, per backend: TFLOP/s with
    forward 2 T^2 H D and backward twice that."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, heads, tokens, dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    kv = torch.randn(2, 1, kv_heads, tokens, dim, device="cuda", dtype=torch.bfloat16)
    k_rep = kv[0].repeat_interleave(heads // kv_heads, 1).requires_grad_()
    v_rep = kv[1].repeat_interleave(heads // kv_heads, 1).requires_grad_()
    k_gqa, v_gqa = kv[0].clone().requires_grad_(), kv[1].clone().requires_grad_()
    flops = 3 * 2 * tokens * tokens * heads * dim
    rows = []
    for label, backend, k, v, extra in (
        ("flash", SDPBackend.FLASH_ATTENTION, k_rep, v_rep, {}),
        ("cudnn", SDPBackend.CUDNN_ATTENTION, k_rep, v_rep, {}),
        ("efficient", SDPBackend.EFFICIENT_ATTENTION, k_rep, v_rep, {}),
        ("flash-gqa", SDPBackend.FLASH_ATTENTION, k_gqa, v_gqa, {"enable_gqa": True}),
        ("cudnn-gqa", SDPBackend.CUDNN_ATTENTION, k_gqa, v_gqa, {"enable_gqa": True}),
    ):
        try:
            with sdpa_kernel([backend]):
                def once():
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, **extra)
                    out.backward(torch.ones_like(out))
                once()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(3):
                    once()
                torch.cuda.synchronize()
                seconds = (time.perf_counter() - t0) / 3
            rows.append({"attn_backend": label, "tokens": tokens, "fwd_bwd_s": round(seconds, 4),
                         "tflops": round(flops / seconds / 1e12, 1)})
        except Exception as exc:  # noqa: BLE001 - a backend this GPU lacks is a row, not the end
            rows.append({"attn_backend": label, "tokens": tokens, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def profile_step(policy, optimizer, config, tokens: int, variant: str) -> None:
    """Top CUDA kernels of one update step (ours), grouped by kind."""
    from torch.profiler import ProfilerActivity, profile

    _prepare(policy, "ours", variant)
    ours_step(policy, optimizer, tokens, config.vocab_size, variant)  # warm
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        ours_step(policy, optimizer, tokens, config.vocab_size, variant)
    events = [e for e in prof.key_averages() if e.device_time_total > 0]
    total = sum(e.self_device_time_total for e in events)
    groups: dict[str, float] = {}
    for e in events:
        name = e.key.lower()
        kind = ("attention" if any(w in name for w in ("flash", "fmha", "attention", "cudnn"))
                else "gemm" if any(w in name for w in ("gemm", "cutlass", "sm90_xmma", "nvjet", "matmul"))
                else "elementwise/other")
        groups[kind] = groups.get(kind, 0.0) + e.self_device_time_total
    print("# profile (one ours step incl. old_log_prob and ref), CUDA time by kind:", flush=True)
    for kind, us in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"#   {kind}: {us / 1e6:.2f} s ({100 * us / max(total, 1):.0f}%)", flush=True)
    for e in sorted(events, key=lambda e: -e.self_device_time_total)[:20]:
        print(f"#   {e.self_device_time_total / 1e6:7.3f} s  x{e.count:<5} {e.key[:110]}", flush=True)


_fresh_draws = itertools.count(1)


def _samples(tokens: int, vocab: int, variant: str = "") -> list:
    """One sequence of T tokens plus a 2-token sibling with another reward (non-zero advantage).
    `fresh` in the variant: T tokens as 8 sequences (4 groups of 2 siblings) whose lengths are
    drawn anew at every step, as a real run's micro-steps bring new part lengths (an attention
    backend that plans per shape pays for each)."""
    from train.learn.step import Sample

    if "fresh" in variant:
        g = torch.Generator().manual_seed(next(_fresh_draws))
        weights = 0.2 + torch.rand(8, generator=g)
        lengths = (weights / weights.sum() * tokens).long().tolist()
        lengths[-1] = tokens - sum(lengths[:-1])
        ids = torch.randint(0, vocab, (tokens,), generator=g).tolist()
        starts = [sum(lengths[:i]) for i in range(8)]
        return [Sample(ids[a:a + 1], ids[a + 1:a + n], float(i % 2), f"g{i // 2}")
                for i, (a, n) in enumerate(zip(starts, lengths))]
    g = torch.Generator().manual_seed(tokens)
    ids = torch.randint(0, vocab, (tokens,), generator=g).tolist()
    return [Sample(ids[:1], ids[1:], 1.0, "g"), Sample(ids[:1], ids[1:2], 0.0, "g")]


def _timed(samples: list, timer, metrics: dict) -> dict:
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
    return {"update_s": timer.seconds["update_actor"], "step_s": sum(timer.seconds.values()),
            "lengths": lengths, "kl": metrics.get("kl")}


def ours_step(policy, optimizer, tokens: int, vocab: int, variant: str) -> dict:
    from train.learn.step import StepConfig, grpo_step
    from train.learn.timing import PhaseTimer

    samples, timer = _samples(tokens, vocab, variant), PhaseTimer()
    with _attention_backend(variant):
        metrics = grpo_step(policy, optimizer, samples, StepConfig(token_budget=tokens + 2), timer)
    return _timed(samples, timer, metrics)


LOOP_KEYS = ("update_variant", "update_keep_layers", "update_free_gib", "update_peak_gib")


def loop_stepper(policy, optimizer, tokens: int):
    """A step function over train run's own learner: train.learn.learner.prepare_update (selective
    checkpointing, fused LoRA, the variant chooser with the default knobs) and Learner.step."""
    from types import SimpleNamespace

    from train.learn.packed_attention import set_native_gqa
    from train.learn.step import StepConfig
    from train.learn.timing import PhaseTimer
    from train.learn.learner import Learner, prepare_update
    from train.settings import Knobs

    set_native_gqa(True)  # the loop's default (an earlier variant may have turned it off)
    config = StepConfig(token_budget=tokens + 2)
    learner = Learner(SimpleNamespace(model=policy), optimizer, config,
                      variants=prepare_update(policy, Knobs(), config))

    def step(policy, optimizer, tokens: int, vocab: int, variant: str) -> dict:
        samples, timer = _samples(tokens, vocab), PhaseTimer()
        metrics = learner.step(samples, timer)
        return {**_timed(samples, timer, metrics), **{k: metrics[k] for k in LOOP_KEYS if k in metrics}}

    return step


def plain_step(policy, optimizer, tokens: int, vocab: int, variant: str) -> dict:
    g = torch.Generator().manual_seed(tokens)
    device = next(policy.parameters()).device
    ids = torch.randint(0, vocab, (1, tokens), generator=g).to(device)
    policy.train()
    t0 = time.perf_counter()
    loss = policy(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    _sync(str(device))
    seconds = time.perf_counter() - t0
    return {"update_s": seconds, "step_s": seconds, "lengths": [tokens]}


def measure(policy, optimizer, config, n_params, mode, tokens, variant, device, steps, warmup) -> dict:
    if variant == "loop":
        step = loop_stepper(policy, optimizer, tokens)
    else:
        step = ours_step if mode == "ours" else plain_step
        _prepare(policy, mode, variant)
    row = {"mode": mode, "variant": variant if mode == "ours" else "plain", "tokens": tokens}
    oom = False
    _reset_memory(device)
    error = None
    try:
        runs = [step(policy, optimizer, tokens, config.vocab_size, variant) for _ in range(warmup + steps)]
    except torch.OutOfMemoryError:
        oom = True
    except Exception as exc:  # noqa: BLE001 - one broken variant must not cost the other figures
        error = f"{type(exc).__name__}: {str(exc)[:300]}"
    if error:
        optimizer.zero_grad(set_to_none=True)
        row.update(oom=False, error=error)
        _reset_memory(device)
        return row
    if oom:
        optimizer.zero_grad(set_to_none=True)
        row.update(oom=True, peak_gib=_peak_gib(device))
        _reset_memory(device)
        return row
    timed = runs[warmup:]
    update_s = sorted(r["update_s"] for r in timed)[len(timed) // 2]
    flops = model_flops(config, n_params, timed[0]["lengths"])
    row.update(oom=False, update_s=round(update_s, 3), step_s=round(timed[-1]["step_s"], 3),
               tokens_per_s=round(tokens / update_s, 1),
               mfu=round(flops / update_s / PEAK_BF16, 4), peak_gib=_peak_gib(device),
               tflops=round(flops / update_s / 1e12, 1))
    row.update({k: timed[-1][k] for k in LOOP_KEYS if k in timed[-1]})  # loop: the last timed step's choice
    return row


def run_config(name, args) -> list[dict]:
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    policy, config, n_params = build_policy(name, args.device, dtype)
    from train.learn.lora import make_optimizer

    optimizer = make_optimizer(policy, 1e-5)
    print(f"# {name}: {n_params / 1e9:.3f}B base parameters", flush=True)
    main_variant = args.variants[0]
    plan = [("ours", t, main_variant) for t in args.tokens + args.ours_only_tokens]
    plan += [("ours", t, v) for t in args.variant_tokens for v in args.variants[1:]]
    plan += [("plain", t, "plain") for t in args.plain_tokens]

    def order(item):
        mode, tokens, variant = item
        first = args.priority.index(tokens) if tokens in args.priority else 99
        return first, 0 if variant == main_variant else 1 if mode == "plain" else 2

    plan.sort(key=order)
    rows = []
    for mode, tokens, variant in plan:
        long = tokens > args.long_tokens
        row = measure(policy, optimizer, config, n_params, mode, tokens, variant, args.device,
                      steps=1 if long else args.steps, warmup=args.warmup)
        row.update(config=name, n_params=n_params)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
    if args.profile:
        profile_step(policy, optimizer, config, args.priority[0], main_variant)
    del policy, optimizer
    _reset_memory(args.device)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| model | step | variant | tokens | update s | tokens/s | MFU | peak GiB |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        peak = f"{r['peak_gib']:.1f}" if r.get("peak_gib") is not None else "-"
        if r.get("update_variant"):  # loop: the variant it chose
            r = {**r, "variant": f"{r['variant']} ({r['update_variant']})"}
        if r.get("error"):
            lines.append(f"| {r['config']} | {r['mode']} | {r['variant']} | {r['tokens']} | error | - | - | - |")
        elif r["oom"]:
            lines.append(f"| {r['config']} | {r['mode']} | {r['variant']} | {r['tokens']} | OOM | - | - | {peak} |")
        else:
            lines.append(f"| {r['config']} | {r['mode']} | {r['variant']} | {r['tokens']} | {r['update_s']} "
                         f"| {r['tokens_per_s']:.0f} | {100 * r['mfu']:.1f}% | {peak} |")
    return "\n".join(lines)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="8b,1.5b")
    p.add_argument("--device", default="cuda")
    p.add_argument("--tokens", type=_ints, default=_ints("12288,24576,36864"))
    p.add_argument("--ours-only-tokens", type=_ints, default=_ints("65536"))
    p.add_argument("--plain-tokens", type=_ints, default=_ints("12288,24576,36864,45056"))
    p.add_argument("--variants", default="sac", help="comma list: full, sac, sac-keep12, sac-cudnn, sac-flash, "
                   "sac-fresh (new part lengths every step), "
                   "..., loop (train run's own); the first at every token count, the others at --variant-tokens only")
    p.add_argument("--variant-tokens", type=_ints, default=_ints("36864"))
    p.add_argument("--priority", type=_ints, default=_ints("36864,65536,45056"),
                   help="token counts measured first (results are written as they come)")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--long-tokens", type=int, default=30000, help="above this, one timed step")
    p.add_argument("--out", default=None, help="append one JSON line per measurement")
    p.add_argument("--attn-bench", type=_ints, default=[], help="token counts for the SDPA backend bench")
    p.add_argument("--profile", action="store_true", help="profile one step at the first --priority size")
    args = p.parse_args(argv)
    args.variants = args.variants.split(",")
    if args.device.startswith("cuda"):
        import transformers

        print(f"# torch {torch.__version__}, transformers {transformers.__version__}, "
              f"{torch.cuda.get_device_name()}", flush=True)
    for tokens in args.attn_bench:
        attention_bench(tokens)
    rows = [r for name in args.configs.split(",") if name for r in run_config(name, args)]
    print(table(rows))


if __name__ == "__main__":
    main()
