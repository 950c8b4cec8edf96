"""`train rm`'s settings one at a time, per token, against its default in the same process.

    PYTHONUNBUFFERED=1 PYTHONPATH=. python3 benchmarks/rm_levers.py --out $OUT/rm_levers.json \\
        --variants "lora_bf16_inputs=true;selective_checkpointing=true;pack_tokens=8192" --profile

`rm_bench.py` times whole optimizer steps of 64 random pairs against TRL (minutes per trainer,
and a step's time moves with its pairs' lengths). This times `train rm`'s own micro-steps
(`train/rm/run.py: member_model` and `update_step`, forward and backward of each pair, the
optimizer step once at the end) on a dozen pairs per variant, so the settings compare per
token in seconds each. Baseline: the default settings (`--set` nothing), measured
first in the same run; each variant is a `--set`-style override list, `;` between variants,
`,` inside one.

Workload: rm_bench's (a randomly initialised Mistral-7B shape, bf16, LoRA r128/a256/d0.05 on
q/k/v/o/gate/up/down plus the head, pairs shaped like UltraFeedback's: a shared prompt of
256-2,048 tokens and two answers of 256-2,048 each, seeded). `--pairs` pairs are timed after
`--warmup` pairs of the same lengths' kind (allocator growth, cuBLAS and flash init). Each
variant is timed on its own draw of pairs (lengths it has not met, as in training, where
nearly every pair is a new length; `--same-pairs` for one draw), so per-length setup costs
(cuDNN attention's execution plans) count as they do in a real run.

Prints one JSON line per variant: packed tokens/s, pairs/s, the ratio to the default, peak
memory (torch.cuda.max_memory_allocated), and the linear layers' model TFLOP/s (6 N_linear
per token: forward, recompute, input-gradient backward of the frozen base; attention and LoRA
not counted). `--profile`: a torch.profiler table of the default's kernels over two pairs
(self CUDA time, top 25) and the GPU's busy fraction of the wall time.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def parse_variants(text: str) -> list[dict]:
    """"a=1,b=2;c=3" -> [{"a": "1", "b": "2"}, {"c": "3"}]."""
    variants = []
    for chunk in filter(None, (c.strip() for c in text.split(";"))):
        variants.append(dict(kv.split("=", 1) for kv in chunk.split(",")))
    return variants


def time_variant(args, pairs, warmup, sets: dict, profile: bool = False) -> dict:
    from types import SimpleNamespace

    import torch

    from train.rm.artifacts import Retention
    from train.rm.model import packed_length
    from train.rm.run import Context, RMOptions, update_step, apply_sets, member_model

    device = torch.device("cpu" if args.smoke else "cuda")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    opts = apply_sets(RMOptions(model=str(args.model_dir), device=device.type), sets)
    ctx = Context(run_id="levers", base_path=Path(args.model_dir), out_dir=Path(args.work), device=device,
                  tokenizer=SimpleNamespace(pad_token_id=0), pairs=warmup + pairs, eval_rows=[], eval_ids=[],
                  proxy_index=[], data_errors=[], retention=Retention(), pack=opts.pack is not False)
    model = member_model(opts, ctx, opts.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=opts.lr, weight_decay=0.0, fused=device.type == "cuda")
    n_linear = sum(m.weight.numel() for name, m in model.named_modules()
                   if isinstance(m, torch.nn.Linear) and ".layers." in name and "lora_" not in name)
    order = iter(range(len(ctx.pairs)))
    update_step(dataclasses.replace(opts, grad_accum=len(warmup)), ctx, model, optimizer, params, order)
    sync()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    update_step(dataclasses.replace(opts, grad_accum=len(pairs)), ctx, model, optimizer, params, order)
    sync()
    seconds = time.perf_counter() - start
    tokens = sum(packed_length(*p) for p in pairs)
    out = {"sets": sets, "pairs": len(pairs), "packed_tokens": tokens, "seconds": round(seconds, 3),
           "tokens_per_s": round(tokens / seconds, 1), "pairs_per_s": round(len(pairs) / seconds, 3),
           "linear_tflops": round(6 * n_linear * tokens / seconds / 1e12, 1),
           "peak_mib": round(torch.cuda.max_memory_allocated() / 2**20) if device.type == "cuda" else None}
    if profile:
        out["profile"] = profile_pairs(opts, ctx, model, optimizer, params, warmup[:2])
    del model, optimizer, params
    gc.collect()
    torch.cuda.empty_cache()
    return out


def profile_pairs(opts, ctx, model, optimizer, params, pairs) -> dict:
    """Kernels of two more pairs (forward, backward, optimizer step) under torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from train.rm.run import update_step

    ctx = dataclasses.replace(ctx, pairs=pairs)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        update_step(dataclasses.replace(opts, grad_accum=len(pairs)), ctx, model, optimizer, params, iter(range(len(pairs))))
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
    events = prof.key_averages()
    key = "self_device_time_total" if hasattr(events[0], "self_device_time_total") else "self_cuda_time_total"
    busy_us = sum(getattr(e, key) for e in events if e.device_type == torch.autograd.DeviceType.CPU)
    table = events.table(sort_by=key, row_limit=25, max_name_column_width=70)
    print(table, flush=True)
    return {"wall_s": round(wall, 3), "gpu_busy_s": round(busy_us / 1e6, 3), "busy_fraction": round(busy_us / 1e6 / wall, 3),
            "top": [{"name": e.key[:90], "self_gpu_ms": round(getattr(e, key) / 1e3, 1), "calls": e.count}
                    for e in sorted(events, key=lambda e: -getattr(e, key))[:25]]}


def attention_check() -> dict:
    """The pair attention with flash called directly against torch's dispatcher, on a row of two
    pairs (bf16, grouped-query heads): the largest difference of the outputs."""
    from types import SimpleNamespace

    import torch

    from train.rm import attention

    torch.manual_seed(0)
    bounds = [0, 700, 1500, 2100, 2400, 3000, 3900]  # pair 1: prompt 700, answers 800/600; pair 2: 300, 600, 900
    q = torch.randn(1, 32, 3900, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, 8, 3900, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    outs = {}
    for kernel in attention.KERNELS:
        attention._kernel = kernel
        outs[kernel] = attention.pair_sdpa_forward(SimpleNamespace(training=False), q, k, v, None,
                                                   cu_seq_lens_q=torch.tensor(bounds))[0].float()
    attention._kernel = "flash"
    return {"max_abs_diff": float((outs["flash"] - outs["sdpa"]).abs().max()),
            "flash_usable": attention._flash_usable(q, k, v, 0.0)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default="lora_bf16_inputs=true;selective_checkpointing=true;pack_tokens=8192",
                    help="';'-separated variants, each ','-separated key=value train rm settings")
    ap.add_argument("--pairs", type=int, default=12, help="timed pairs per variant")
    ap.add_argument("--warmup", type=int, default=3, help="untimed pairs first, per variant")
    ap.add_argument("--prompt-tokens", default="256,2048")
    ap.add_argument("--answer-tokens", default="256,2048")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--same-pairs", action="store_true",
                    help="time every variant on the same pairs (default: each its own draw, unseen lengths)")
    ap.add_argument("--default-last", action="store_true", help="time the default again after the variants")
    ap.add_argument("--profile", action="store_true", help="profile the default's kernels over two pairs")
    ap.add_argument("--smoke", action="store_true", help="toy shape on CPU: checks the wiring only")
    ap.add_argument("--work", default="/tmp/rm_bench")
    ap.add_argument("--model-dir", default="/tmp/rm_bench/mistral7b_random")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    from rm_bench import _range, build_model, make_pairs

    started = time.perf_counter()
    build_model(Path(args.model_dir), args.layers, smoke=args.smoke)
    print(f"model ready in {time.perf_counter() - started:.1f} s", flush=True)
    if not args.smoke:
        print(json.dumps({"attention_check": attention_check()}), flush=True)
    draw = lambda n, seed: make_pairs(n, _range(args.prompt_tokens), _range(args.answer_tokens), seed=seed)  # noqa: E731
    warmup = draw(args.warmup, 0)
    results = []
    variants = [{}] + parse_variants(args.variants) + ([{}] if args.default_last else [])
    for i, sets in enumerate(variants):
        timed = draw(args.pairs, 1 if args.same_pairs else 1 + i)  # new lengths, as training meets them
        row = time_variant(args, timed, warmup, sets, profile=args.profile and i == 0)
        if results:
            row["vs_default"] = round(row["tokens_per_s"] / results[0]["tokens_per_s"], 3)
        results.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "profile"}), flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
