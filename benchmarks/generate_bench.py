"""Generation throughput: our transformers backend vs plain `model.generate`, same run, same GPU.

A randomly initialised Qwen3-like model (default: the Qwen3-1.7B shape, ~1.7B parameters,
bf16), a batch of random 1024-token prompts, a fixed number of new tokens (EOS never stops a
row, so every method generates exactly batch x new_tokens tokens). Methods:

- `generate_sample`: plain `model.generate(do_sample=True)` with its default settings;
- `ours_static_compiled`: train.generate's decode loop, static KV cache, decode step compiled
  with torch.compile(mode="reduce-overhead") (CUDA graphs), decode attention from
  train.generate.attention (`--decode-kernel`); timed after one warm-up call that pays for
  compilation and graph capture (reported separately);
- `ours_prefill`: the prompt forward and one token alone (how much of a call is prefill);
- `ours_dynamic`: the same loop with the dynamic cache and no compilation (CPU's path).

`--new` takes a comma list (e.g. 256,1024): every method runs at each response length, so
each of ours' figures has plain generate's at the same shape beside it. Keys are
`<method>@<new>`. `logprob_check@<new>` compares ours' returned logprobs for a few rows with
one uncached forward over prompt + response (a wrong KV cache shows up as large differences).

tokens/s = generated tokens / wall seconds of the call, prefill included.

    PYTHONPATH=. python3 benchmarks/generate_bench.py --batch 64 --prompt 1024 --new 256,1024 --out results.json
"""
from __future__ import annotations

import argparse
import json
import time
import traceback


def qwen3_like(size: str):
    from transformers import Qwen3Config

    shapes = {
        "1.7b": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                     num_key_value_heads=8, head_dim=128),
        "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16),
    }[size]
    return Qwen3Config(vocab_size=151936, max_position_embeddings=8192, tie_word_embeddings=True,
                       rope_theta=1_000_000, **shapes)


def build_model(size: str, device: str):
    import torch
    from transformers import Qwen3ForCausalLM

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    with torch.device(device):
        torch.set_default_dtype(dtype)
        model = Qwen3ForCausalLM(qwen3_like(size))
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


def plain_generate(model, prompts, new: int, **kwargs):
    import torch

    mask = torch.ones_like(prompts)
    with torch.inference_mode():
        return model.generate(input_ids=prompts, attention_mask=mask, max_new_tokens=new, min_new_tokens=new,
                              do_sample=True, **kwargs)


def ours(model, prompts, new: int, static: bool, step_fn=None):
    import torch

    from train.generate.base import SamplingConfig
    from train.generate.sampler import decode, make_batch

    rows = prompts.tolist()
    batch = make_batch(rows, [new] * len(rows), pad_id=0, device=prompts.device)
    generator = torch.Generator(device=prompts.device).manual_seed(0)
    ids, lps = decode(model, batch, eos_ids=[-1], pad_id=0, sampling=SamplingConfig(max_new_tokens=new),
                      generator=generator, static=static, step_fn=step_fn)
    assert all(len(r) == new for r in ids), "every row must generate exactly `new` tokens"
    return ids, lps


def logprob_check(model, prompts, ids, lps, rows: int = 4) -> dict:
    """|ours' logprob - an uncached forward's| over the responses of the first `rows` rows."""
    import torch

    diffs = []
    with torch.inference_mode():
        for row in range(min(rows, len(ids))):
            seq = torch.cat([prompts[row], torch.tensor(ids[row], device=prompts.device)])[None]
            logits = model(input_ids=seq).logits[0, prompts.shape[1] - 1:-1].float()  # (T, V)
            full = torch.log_softmax(logits, -1).gather(-1, seq[0, prompts.shape[1]:, None])[:, 0]
            diffs.append((full - torch.tensor(lps[row], device=full.device)).abs())
    diffs = torch.cat(diffs)
    return {"mean_abs": round(diffs.mean().item(), 4), "max_abs": round(diffs.max().item(), 4)}


def measure(name: str, fn, tokens: int, results: dict, warmup: bool = False) -> None:
    try:
        if warmup:
            results[f"{name}_first_call_s"] = round(timed(fn), 2)
        seconds = timed(fn)
        results[name] = {"seconds": round(seconds, 3), "tokens_per_s": round(tokens / seconds, 1)}
    except Exception as exc:  # noqa: BLE001 - a benchmark reports every method it can
        results[name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        traceback.print_exc()
    print(name, results[name], flush=True)


def use_decode_kernel(kernel: str) -> None:
    import contextlib

    import train.generate.sampler as sampler
    from train.generate.attention import set_decode_kernel

    if kernel == "repeat":  # leave the model on transformers' attention during decode
        sampler.decode_attention = lambda model: contextlib.nullcontext()
    else:
        set_decode_kernel(kernel)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1.7b", choices=["1.7b", "tiny"])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--new", default="256", help="new tokens per row; a comma list runs each")
    parser.add_argument("--methods", default="generate_sample,ours_static_compiled,ours_prefill,ours_dynamic")
    parser.add_argument("--decode-kernel", default="matmul", choices=["matmul", "sdpa", "repeat"],
                        help="ours' decode attention: train.generate.attention's grouped-query kernels, or "
                             "'repeat' = transformers' own SDPA path (K/V repeated per query head; before run 3)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    use_decode_kernel(args.decode_kernel)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = build_model(args.size, device)
    prompts = torch.randint(100, 150000 if args.size == "1.7b" else 1000, (args.batch, args.prompt), device=device)
    results = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
               "params_b": round(sum(p.numel() for p in model.parameters()) / 1e9, 3), **vars(args)}
    import transformers

    results["transformers"] = transformers.__version__
    methods = args.methods.split(",")
    step = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True) if device == "cuda" else None
    for new in [int(n) for n in args.new.split(",")]:
        tokens, at = args.batch * new, f"@{new}"
        if "ours_static_compiled" in methods:
            out = {}
            measure("ours_static_compiled" + at, lambda: out.update(r=ours(model, prompts, new, True, step)), tokens,
                    results, warmup=True)
            if "r" in out:
                results["logprob_check" + at] = logprob_check(model, prompts, *out.pop("r"))
                print("logprob_check" + at, results["logprob_check" + at], flush=True)
        if "ours_prefill" in methods and "ours_prefill@1" not in results:  # prefill + one token: fixed cost per call
            measure("ours_prefill@1", lambda: ours(model, prompts, 1, True), args.batch, results)
        if "ours_dynamic" in methods:
            measure("ours_dynamic" + at, lambda: ours(model, prompts, new, False), tokens, results)
        if "generate_sample" in methods:
            measure("generate_sample" + at, lambda: plain_generate(model, prompts, new), tokens, results)
    print(json.dumps(results, indent=1))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
