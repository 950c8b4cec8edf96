"""Reward-model benchmark (issue 17): `train rm`'s loop against plain TRL `RewardTrainer`, and
the soup's accumulate-and-export against one member's training, on ONE GPU.

    PYTHONUNBUFFERED=1 PYTHONPATH=. python3 benchmarks/rm_bench.py --out $OUT/rm_bench.json

Workload (both trainers, same process order, same pairs): a randomly initialised Mistral-7B
shape (32 layers, hidden 4096, 32/8 heads, intermediate 14336, vocab 32000; built here with
`save_pretrained`, nothing downloaded) in bf16, loaded as a scalar sequence classifier;
random preference pairs shaped like UltraFeedback's, a shared prompt of 256-2,048 tokens then
two answers of 256-2,048 each, so 512-4,096 tokens a side (uniform, seeded; `--prompt-tokens
0,0` for unrelated sides); micro-batch 1 (TRL; ours packs pairs, below), gradient accumulation 64, lr 5e-6 cosine, LoRA r128/a256/d0.05 on
q/k/v/o/gate/up/down plus the head, gradient checkpointing (both), bf16 compute.

- `ours`: `train.rm.run.train_member` (the loop `train rm` runs: each pair packed in one row
  as [prompt | chosen answer | rejected answer], train/rm/pair_attention.py, consecutive pairs
  sharing a row up to `pack_tokens`), then the soup:
  `soup_accumulate_export` of the trained member (merge LoRA, fold into the float32 running
  mean on the GPU, export the bf16 full model to disk), timed twice (first and second member).
- `trl`: `trl.RewardTrainer` with `RewardConfig` at the same settings (its defaults otherwise,
  `disable_dropout=False` so LoRA dropout stays as the recipe says), pre-tokenised pairs; a
  `TrainerCallback` times each optimizer step.

Each trainer runs in its own subprocess (clean allocator and peak-memory counter). pairs/s
is measured over the optimizer steps after the first (warm-up); peak memory is
`torch.cuda.max_memory_allocated` over training. The member training time the soup is
compared with is the measured steady step time x `--member-steps` (96, data root 004's formal
member): an extrapolation from the measured step, said so in the output.

`ours` runs `train rm`'s defaults (pairs packed up to 8,192 tokens a row, flash attention called
directly, bf16 LoRA inputs, fused LoRA). `--ours-variants` adds runs of ours with `train rm
--set` overrides, each against TRL in the ratios (e.g. `pack_tokens=0`: one pair per forward,
the seed's micro-batch 1; `attention_kernel=sdpa`; `selective_checkpointing=true`).

Prints one JSON line per trainer and the ratios: ours/TRL pairs/s (target >= 2x), peak
memory against the seed's 26,592 MiB, soup seconds / member seconds (target <= 0.10).
Needs torch, transformers, peft, and for the TRL side trl (>= 1.16) and datasets.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

SEED_PEAK_MIB = 26_592
SEED_PAIRS_PER_S = 252 * 64 / 3353.29
MISTRAL_7B = dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=32768,
                  rms_norm_eps=1e-5, rope_theta=1e6, sliding_window=None, tie_word_embeddings=False,
                  pad_token_id=0, bos_token_id=1, eos_token_id=2)


# --smoke: the same code path on CPU with a toy shape (checks the wiring, measures nothing)
SMOKE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)


def build_model(out: Path, layers: int, smoke: bool) -> Path:
    """A random Mistral-7B-shaped causal LM saved in bf16 (built on the GPU: seconds)."""
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    if (out / "config.json").is_file():
        return out
    torch.manual_seed(0)
    config = MistralConfig(**{**MISTRAL_7B, "num_hidden_layers": layers, **(SMOKE if smoke else {})})
    with torch.device("cpu" if smoke else "cuda"):
        model = MistralForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out)
    del model
    torch.cuda.empty_cache()
    return out


def make_pairs(n: int, prompt: tuple[int, int], answer: tuple[int, int], seed: int = 0):
    """n (chosen, rejected) token lists: a shared random prompt, then two random answers."""
    rng = random.Random(seed)
    tokens = lambda lo, hi: [rng.randrange(3, 32000) for _ in range(rng.randint(lo, hi))]  # noqa: E731
    pairs = []
    for _ in range(n):
        shared = tokens(*prompt)
        pairs.append((shared + tokens(*answer), shared + tokens(*answer)))
    return pairs


def run_ours(args, pairs, sets: dict | None = None) -> dict:
    """`train rm`'s member loop on the pairs, then (the default settings only) the soup's
    accumulate and export. `sets`: `--set`-style overrides of a variant (no soup)."""
    from types import SimpleNamespace

    import torch

    from train.rm.artifacts import Retention
    from train.rm.run import Clock, Context, RMOptions, apply_sets, soup_accumulate_export, train_member
    from train.rm.soup import RunningMean

    device = torch.device("cpu" if args.smoke else "cuda")
    opts = RMOptions(model=str(args.model_dir), max_steps=args.steps, grad_accum=args.grad_accum, device=device.type)
    opts = apply_sets(opts, sets or {})
    ctx = Context(run_id="bench", base_path=Path(args.model_dir), out_dir=Path(args.work), device=device,
                  tokenizer=SimpleNamespace(pad_token_id=0), pairs=pairs, eval_rows=[], eval_ids=[], proxy_index=[],
                  data_errors=[], retention=Retention(), pack=True)
    publisher = _StepTimes()
    _reset_peak()
    model, _ = train_member(opts, ctx, 0, 0, Clock(None, 0.0), publisher, log=lambda line: None)
    out = _summary("ours", publisher.seconds, args.grad_accum, _peak_mib(), {"pack": True, "sets": sets or {}})
    if sets:
        return out
    soup = RunningMean(device)
    first_s, n_params = soup_accumulate_export(model, soup, Path(args.work) / "soup_1")
    del model
    shutil.rmtree(Path(args.work) / "soup_1")  # 14.5 GB: the device's disk holds the base and one export
    model2, _ = _second_member(opts, ctx, train_member)
    second_s, _ = soup_accumulate_export(model2, soup, Path(args.work) / "soup_2")
    shutil.rmtree(Path(args.work) / "soup_2")
    out.update(soup_first_member_s=round(first_s, 2), soup_accumulate_export_s=round(second_s, 2),
               soup_parameters=n_params)
    return out


def _second_member(opts, ctx, train_member):
    """A second member (one step: its weights only need to exist) for the second fold-in."""
    import dataclasses

    from train.rm.run import Clock

    return train_member(dataclasses.replace(opts, max_steps=1, grad_accum=1), ctx, 1, 0, Clock(None, 0.0),
                        _StepTimes(), log=lambda line: None)


class _StepTimes:
    """Collects each step's seconds (the publisher interface train_member writes to)."""

    def __init__(self):
        self.seconds = []

    def step(self, row: dict) -> None:
        self.seconds.append(row["seconds"])

    def artifact(self, artifact) -> None:
        pass


def run_trl(args, pairs) -> dict:
    """Plain TRL RewardTrainer at the same settings; a callback times each optimizer step."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig, TaskType
    from tokenizers import Tokenizer, models
    from transformers import AutoModelForSequenceClassification, PreTrainedTokenizerFast, TrainerCallback
    from trl import RewardConfig, RewardTrainer

    from train.rm.model import LORA_TARGETS

    vocab = {f"t{i}": i for i in range(32000)}
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="t1")),
                                        pad_token="t0", eos_token="t2", unk_token="t1")
    model = AutoModelForSequenceClassification.from_pretrained(
        args.model_dir, num_labels=1, dtype=torch.float32 if args.smoke else torch.bfloat16)
    model.config.pad_token_id = 0
    data = Dataset.from_dict({"chosen_ids": [c for c, _ in pairs], "rejected_ids": [r for _, r in pairs]})
    config = RewardConfig(output_dir=str(Path(args.work) / "trl"), per_device_train_batch_size=1,
                          gradient_accumulation_steps=args.grad_accum, learning_rate=5e-6, lr_scheduler_type="cosine",
                          max_steps=args.steps, bf16=not args.smoke, gradient_checkpointing=True, max_length=None,
                          disable_dropout=False, logging_steps=1, save_strategy="no", report_to="none",
                          dataloader_num_workers=0, seed=42)
    peft = LoraConfig(task_type=TaskType.SEQ_CLS, r=128, lora_alpha=256, lora_dropout=0.05,
                      target_modules=list(LORA_TARGETS))
    timer = _TrlStepTimer(TrainerCallback)
    trainer = RewardTrainer(model=model, args=config, train_dataset=data, processing_class=tokenizer,
                            peft_config=peft, callbacks=[timer.callback])
    _reset_peak()
    trainer.train()
    return _summary("trl", timer.seconds, args.grad_accum, _peak_mib(), {"trl": __import__("trl").__version__})


def _reset_peak() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def _peak_mib() -> float:
    import torch

    return torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else 0.0


class _TrlStepTimer:
    def __init__(self, base):
        import torch

        timer = self

        class Callback(base):
            def on_step_begin(self, args, state, control, **kwargs):
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                timer.start = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                timer.seconds.append(time.perf_counter() - timer.start)

        self.seconds, self.start, self.callback = [], 0.0, Callback()


def _summary(name: str, seconds: list[float], accum: int, peak_mib: float, extra: dict) -> dict:
    steady = seconds[1:] or seconds  # the first step warms up kernels and the allocator
    step_s = sum(steady) / len(steady)
    return {"trainer": name, "steps": len(seconds), "step_seconds": [round(s, 2) for s in seconds],
            "steady_step_s": round(step_s, 2), "pairs_per_s": round(accum / step_s, 3),
            "peak_mib": round(peak_mib), **extra}


def child(args) -> None:
    with open(args.pairs_file) as fh:
        pairs = [tuple(p) for p in json.load(fh)]
    if args.child.startswith("ours"):
        spec = args.child[len("ours["):-1] if args.child.startswith("ours[") else ""
        result = run_ours(args, pairs, dict(item.split("=", 1) for item in spec.split(",") if item))
    else:
        result = run_trl(args, pairs)
    print("RESULT " + json.dumps(result), flush=True)


def parent(args) -> None:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    model_dir = build_model(Path(args.model_dir), args.layers, args.smoke)
    print(f"model ready in {time.perf_counter() - start:.0f} s: {model_dir}", flush=True)
    pairs = make_pairs(args.steps * args.grad_accum, _range(args.prompt_tokens), _range(args.answer_tokens))
    sides = [len(side) for pair in pairs for side in pair]
    print(f"{len(pairs)} pairs, {min(sides)}-{max(sides)} tokens a side", flush=True)
    pairs_file = work / "pairs.json"
    pairs_file.write_text(json.dumps(pairs))
    results = {}
    variants = [f"ours[{v.strip()}]" for v in args.ours_variants.split(";") if v.strip()]
    for name in args.trainers.split(",") + variants:
        t0 = time.perf_counter()
        cmd = [sys.executable, __file__, "--child", name, "--pairs-file", str(pairs_file),
               *[f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
                 if k in ("model_dir", "work", "steps", "grad_accum", "layers")],
               *(["--smoke"] if args.smoke else [])]
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
        if line is None:
            print(f"{name} failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}", flush=True)
            continue
        results[name] = {**json.loads(line[7:]), "wall_s": round(time.perf_counter() - t0, 1)}
        print(json.dumps(results[name]), flush=True)
    report = ratios(results, args.member_steps)
    print(json.dumps(report, indent=1), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"results": results, "ratios": report, "args": vars(args)}, indent=1))


def _range(text: str) -> tuple[int, int]:
    lo, hi = (int(x) for x in text.split(","))
    return lo, hi


def ratios(results: dict, member_steps: int) -> dict:
    ours, trl = results.get("ours"), results.get("trl")
    out = {"seed_anchor_pairs_per_s": round(SEED_PAIRS_PER_S, 2), "seed_peak_mib": SEED_PEAK_MIB}
    if ours:
        member_s = ours["steady_step_s"] * member_steps
        out.update(ours_peak_vs_seed=round(ours["peak_mib"] / SEED_PEAK_MIB, 3),
                   member_training_s_extrapolated=round(member_s, 1),
                   soup_over_member=round(ours["soup_accumulate_export_s"] / member_s, 4))
    if ours and trl:
        out["pairs_per_s_ours_over_trl"] = round(ours["pairs_per_s"] / trl["pairs_per_s"], 3)
        if trl["peak_mib"]:  # 0 in a --smoke run on CPU
            out["peak_ours_over_trl"] = round(ours["peak_mib"] / trl["peak_mib"], 3)
    for name, variant in results.items():
        if name.startswith("ours[") and trl:
            out[f"pairs_per_s_{name}_over_trl"] = round(variant["pairs_per_s"] / trl["pairs_per_s"], 3)
            out[f"peak_mib_{name}"] = variant["peak_mib"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=2, help="optimizer steps per trainer (the first is warm-up)")
    ap.add_argument("--grad-accum", type=int, default=64)
    ap.add_argument("--prompt-tokens", default="256,2048", help="shared prompt length range (0,0: none)")
    ap.add_argument("--answer-tokens", default="256,2048", help="each answer's length range")
    ap.add_argument("--layers", type=int, default=32, help="fewer for a quick smoke run")
    ap.add_argument("--member-steps", type=int, default=96, help="a soup member's steps (data root 004: 96)")
    ap.add_argument("--trainers", default="ours,trl")
    ap.add_argument("--ours-variants", default="",
                    help="more runs of ours, ';'-separated, each a comma list of train rm --set overrides, e.g. "
                         "'pack_tokens=8192;selective_checkpointing=true,lora_bf16_inputs=true' (no soup for these)")
    ap.add_argument("--smoke", action="store_true", help="toy shape on CPU: checks the wiring only")
    ap.add_argument("--work", default="/tmp/rm_bench")
    ap.add_argument("--model-dir", default="/tmp/rm_bench/mistral7b_random")
    ap.add_argument("--out", default=None, help="JSON file for the results")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--pairs-file", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    child(args) if args.child else parent(args)


if __name__ == "__main__":
    main()
