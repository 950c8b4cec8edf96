"""The tiny policy: a few-million-parameter Llama-style model that writes solution scripts.

`ensure_tiny_policy()` returns a directory holding a model and tokenizer saved with
`save_pretrained`, building it on first use: a byte-level BPE tokenizer and a small causal
LM pre-trained (loss on the response only) on :mod:`train.tiny.corpus`, in a few minutes
on 2 CPU cores. The directory is then loaded through the same path as any real checkpoint
(:func:`train.policy.loader.load_policy`); `--model` resolves to it here
(:func:`resolve_model_path`).

About 30% of its scripts read Kaggle's input paths and crash (the corpus's `habit`): a failure
its own reward can teach it to drop, so a few GRPO steps raise its valid rate. Without it the
policy's only failures are scattered one-token slips, which a few steps do not move.

The cache lives in $TRAIN_TINY_POLICY_DIR, else ~/.cache/rollout-warehouse/tiny-policy/<key>,
where <key> hashes the recipe (config, corpus, steps) so a changed recipe rebuilds.

The build stops at the recipe's time limit (270 s) to keep the five-minute promise on a busy
machine, so a slow machine gets a policy of fewer steps. $TRAIN_TINY_POLICY_TIME_LIMIT (seconds;
0 for none) overrides it: the tests and CI set 0, so their policy is the same 200 steps on
every machine and a test of what it learns cannot fail for the machine's speed. A cached
policy that was cut short is rebuilt when the limit in force gives it more time than it had.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from train.learn.schedule import cosine, warmup
from train.env.tasks import BUNDLED_ROOT
from train.policy.threads import quiet_cpu_threads

TINY_DIR_ENV = "TRAIN_TINY_POLICY_DIR"
TIME_LIMIT_ENV = "TRAIN_TINY_POLICY_TIME_LIMIT"
MARKER = "tiny_policy.json"
RECIPE_VERSION = 1


@dataclass(frozen=True)
class TinyRecipe:
    """Everything that decides the tiny policy's weights."""

    hidden_size: int = 192
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    intermediate_size: int = 512
    vocab_size: int = 2048
    max_positions: int = 4096
    examples: int = 1200
    habit: float = 0.3  # share of draft/improve answers reading Kaggle's paths (train.tiny.corpus)
    steps: int = 200
    batch_size: int = 8
    lr: float = 3e-3
    warmup: int = 20
    seed: int = 0
    time_limit_s: float = 270.0  # stop early rather than miss the five-minute promise

    def key(self) -> str:
        blob = json.dumps({"v": RECIPE_VERSION, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def default_cache_root() -> Path:
    env = os.environ.get(TINY_DIR_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rollout-warehouse" / "tiny-policy"


def resolve_model_path(spec: str, tiny_cache: str | Path | None = None, log=print) -> Path:
    """The local model directory for `--model spec`: "tiny" is this module's policy (built on
    first use into `tiny_cache`), anything else a Hugging Face model directory."""
    from train.policy.loader import model_directory

    if spec == "tiny":
        return ensure_tiny_policy(tiny_cache, log=log)
    return model_directory(spec)


def ensure_tiny_policy(cache_root: str | Path | None = None, recipe: TinyRecipe = TinyRecipe(),
                       log=print, rebuild: bool = False) -> Path:
    """The tiny policy's directory, pre-training it first when it is not cached yet."""
    out = Path(cache_root or default_cache_root()) / recipe.key()
    if (out / MARKER).is_file() and not rebuild:
        cached = json.loads((out / MARKER).read_text())
        if not _more_time_now(cached, recipe):
            _warn_if_cut_short(cached, recipe, log)
            return out
    out.parent.mkdir(parents=True, exist_ok=True)
    # processes started together (CI's stages, a test's trainers) build it once: the others
    # wait for the builder and then load what it saved
    with open(out.parent / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_unless_cached(out, recipe, log, rebuild)


def _build_unless_cached(out: Path, recipe: TinyRecipe, log, rebuild: bool) -> Path:
    if (out / MARKER).is_file() and not rebuild:
        cached = json.loads((out / MARKER).read_text())
        if not _more_time_now(cached, recipe):
            _warn_if_cut_short(cached, recipe, log)
            return out
        log(f"The cached tiny policy stopped at step {cached['steps']} of {recipe.steps} "
            f"({cached['seconds']:.0f} s); the time limit now allows more, so it is rebuilt.")
    log(f"Pre-training the tiny policy into {out} (once; a few minutes on CPU) ...")
    report = build_tiny_policy(out, recipe, BUNDLED_ROOT, log=log)
    log(f"Tiny policy ready: {report['params'] / 1e6:.1f}M parameters, {report['steps']} steps, "
        f"loss {report['final_loss']:.3f}, {report['seconds']:.0f} s.")
    _warn_if_cut_short(report, recipe, log)
    return out


def _more_time_now(report: dict, recipe: TinyRecipe) -> bool:
    """A policy cut short by a busy machine's limit is rebuilt where the limit now gives it more
    time ($TRAIN_TINY_POLICY_TIME_LIMIT=0 in CI, whose cache outlives one run): else the weaker
    policy would be served from the cache for ever, whatever the variable says."""
    if report.get("steps", recipe.steps) >= recipe.steps:
        return False
    return time_limit(recipe) > report.get("seconds", math.inf)


def _warn_if_cut_short(report: dict, recipe: TinyRecipe, log) -> None:
    """The time limit keeps the five-minute promise on a busy machine, at the policy's cost."""
    if report.get("steps", recipe.steps) < recipe.steps:
        log(f"Warning: the tiny policy stopped at step {report['steps']} of {recipe.steps} "
            f"(the {recipe.time_limit_s:.0f} s limit; the CPU was busy), so fewer of its scripts "
            "run. Rebuild it on a quiet machine with 'train tiny-policy --rebuild' "
            f"(${TIME_LIMIT_ENV}=0 lifts the limit).")


def build_tiny_policy(out: Path, recipe: TinyRecipe, tasks_root: Path, log=print) -> dict:
    """Train tokenizer and model on the corpus and save both into `out`; returns the report."""
    import torch

    limit = time_limit(recipe)  # a bad $TRAIN_TINY_POLICY_TIME_LIMIT fails before the corpus is built

    from train.tiny.corpus import build_examples
    from train.policy.tokenizer import train_tokenizer

    torch.manual_seed(recipe.seed)
    examples = build_examples(tasks_root, recipe.examples, recipe.seed, recipe.habit)
    tokenizer = train_tokenizer(_texts(examples), recipe.vocab_size)
    model = _fresh_model(recipe, tokenizer)
    sequences = [_sequence(tokenizer, e) for e in examples]
    report = _pretrain(model, sequences, tokenizer.pad_token_id, recipe, limit, log)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    report["params"] = sum(p.numel() for p in model.parameters())
    (out / MARKER).write_text(json.dumps({**report, "recipe": asdict(recipe)}, indent=2))
    return report


def _texts(examples) -> list[str]:
    return [m["content"] for e in examples for m in e.messages] + [e.response for e in examples]


def _fresh_model(recipe: TinyRecipe, tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=recipe.hidden_size, intermediate_size=recipe.intermediate_size,
        num_hidden_layers=recipe.layers, num_attention_heads=recipe.heads,
        num_key_value_heads=recipe.kv_heads, max_position_embeddings=recipe.max_positions,
        tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id,
    )
    return LlamaForCausalLM(config)


def _sequence(tokenizer, example) -> tuple[list[int], int]:
    """(prompt + response token ids, prompt length); the response ends with the EOS token."""
    from train.policy.chat import prompt_token_ids

    prompt = prompt_token_ids(tokenizer, example.messages)
    response = tokenizer(example.response, add_special_tokens=False)["input_ids"]
    return prompt + response + [tokenizer.eos_token_id], len(prompt)


def _pretrain(model, sequences, pad_id: int, recipe: TinyRecipe, limit: float, log) -> dict:
    import torch

    rng = random.Random(recipe.seed)
    quiet_cpu_threads()
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.01, betas=(0.9, 0.95))
    model.train()
    start, loss, step = time.monotonic(), float("nan"), 0
    for step in range(1, recipe.steps + 1):
        for group in opt.param_groups:
            group["lr"] = _lr(step, recipe)
        ids, labels = _batch(rng.sample(sequences, recipe.batch_size), pad_id)
        mask = labels != -200  # (B, T)
        out = model(input_ids=ids, attention_mask=mask.long(), labels=labels.masked_fill(~mask, -100))
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss = out.loss.item()
        if step % 20 == 0:
            log(f"  step {step}/{recipe.steps}  loss {loss:.3f}  {time.monotonic() - start:.0f} s")
        if time.monotonic() - start > limit:
            log(f"  time limit reached at step {step} ({limit:.0f} s; ${TIME_LIMIT_ENV}=0 builds all {recipe.steps})")
            break
    model.eval()
    return {"steps": step, "final_loss": loss, "seconds": time.monotonic() - start}


def time_limit(recipe: TinyRecipe) -> float:
    """The build's time limit: $TRAIN_TINY_POLICY_TIME_LIMIT when set (0: none), else the recipe's."""
    raw = os.environ.get(TIME_LIMIT_ENV, "").strip()
    if not raw:
        return recipe.time_limit_s
    try:
        seconds = float(raw)
    except ValueError:
        raise ValueError(f"${TIME_LIMIT_ENV}={raw!r}: give seconds, or 0 for no limit") from None
    return math.inf if seconds <= 0 else seconds


def _lr(step: int, recipe: TinyRecipe) -> float:
    """Warmup, then cosine down to a tenth of the rate (train.learn.schedule)."""
    if step <= recipe.warmup:
        return warmup(recipe.lr, step, recipe.warmup)
    return cosine(recipe.lr, (step - recipe.warmup) / max(1, recipe.steps - recipe.warmup), 0.1)


def _batch(batch: list[tuple[list[int], int]], pad_id: int):
    """(input_ids, labels), right-padded; labels -100 on the prompt, -200 marks padding."""
    import torch

    width = max(len(seq) for seq, _ in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)  # (B, T)
    labels = torch.full((len(batch), width), -200, dtype=torch.long)  # (B, T)
    for row, (seq, prompt_len) in enumerate(batch):
        ids[row, : len(seq)] = torch.tensor(seq)
        labels[row, : len(seq)] = torch.tensor(seq)
        labels[row, :prompt_len] = -100
    return ids, labels
