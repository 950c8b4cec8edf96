"""`train rm`: data root 004's Bradley-Terry reward-model trainer, and its model soup.

One loop, read top to bottom (:func:`run_rm`):
  load_pairs -> check_overlap -> for each member: train_member (load_model, update,
  save_checkpoint) -> soup_accumulate_export -> evaluate (proxy, final) -> publish (rows, receipts).
An out-of-memory or CUDA error in one of these phases is one line naming the phase and the
setting to change (train.device_errors), never a traceback, and leaves no half-written artifact.

The baseline (`--members 1`) is data root 004's: loss -log sigmoid(r_chosen - r_rejected), pairs
chat-templated and left-truncated to 4,096 tokens, chosen and rejected in one forward,
micro-batch 1, accumulation 64, lr 5e-6 cosine, at most 252 steps, LoRA r128/a256/d0.05 on
q/k/v/o/gate/up/down plus a fresh scalar head; saves at progress 126 and at the end (the LoRA
delta with the head), keeping the three with greatest progress.

The soup (`--members M --steps-per-member S`) trains member m from the fresh base with seed
42+m (fresh LoRA, head and optimizer, same pairs), merges its LoRA, folds every parameter into
a running mean on the device and publishes a cumulative bf16 full-model snapshot at progress
(m+1)*S; three are retained. Only finished members enter the soup.

Departures from the seed's recipe: AdamW (torch, fused on GPU) instead of bitsandbytes'
paged_adamw_32bit; on GPU, bf16 autocast over fp32 LoRA weights (inputs not copied to fp32,
the low-rank term in one addmm); the pair packed in one row with its shared prompt once,
[prompt | chosen answer | rejected answer], instead of two rows padded to the longer side, and
consecutive pairs sharing a row up to `pack_tokens` (same rewards and gradients: the loss is a
sum over pairs and each pair attends only within itself; :mod:`train.rm.pair_attention`). On one
H200 (random Mistral-7B shape, pairs up to 4,096 tokens a side) this runs 2.34x TRL's
RewardTrainer at the same settings (benchmarks/RESULTS.md).

A wall clock (`--wall-clock`, `--reserve`) bounds training at wall_clock - reserve seconds
from the start: the run stops with reason `wall_clock_budget_exhausted` (also before a member
that would not finish, judged by the last member's time), then still scores and publishes
what it has within the reserve.
"""
from __future__ import annotations

import dataclasses
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from train.learn.schedule import cosine, warmup
from warehouse.errors import TerminalError

STOP_COMPLETED = "completed"
STOP_WALL_CLOCK = "wall_clock_budget_exhausted"


@dataclass
class RMOptions:
    """Every setting of a reward-model run; defaults are data root 004's baseline."""

    model: str = "tiny"
    pairs: str | None = None  # JSONL (UltraFeedback shape); None: the bundled synthetic pairs
    eval: str | None = None  # JSONL (RewardBench shape); None: the bundled synthetic evaluation set
    proxy_rows: int = 512
    members: int = 1
    steps_per_member: int | None = None  # None: max_steps (one trajectory)
    max_steps: int = 252
    grad_accum: int = 64
    lr: float = 5e-6
    warmup_steps: int = 0
    max_length: int = 4096
    max_grad_norm: float = 1.0
    lora_rank: int = 128
    lora_alpha: int = 256
    lora_dropout: float = 0.05
    seed: int = 42
    save_at: tuple = (126,)
    keep: int = 3
    wall_clock: float | None = None
    reserve: float = 0.0
    device: str = "auto"
    pack: bool | None = None  # None: packed (one row, no padding); False: TRL's padded two-row batch
    grad_checkpointing: bool | None = None  # None: on for CUDA
    # levers for pairs/s (benchmarks/RESULTS.md, "Reward-model trainer"; rm_levers.py times them one at a time):
    pack_tokens: int = 8192  # consecutive pairs share a row up to N tokens (same gradients); 0: one pair per forward
    selective_checkpointing: bool = False  # recompute all but the attention outputs (slower here: off)
    lora_bf16_inputs: bool = True  # GPU: no fp32 copy of each LoRA layer's input (the GRPO update's mixed precision)
    fuse_lora: bool = True  # base GEMM + one addmm for the low-rank term (train.learn.lora.fuse_lora), dropout kept
    compile_norms: bool = False  # the RMSNorms under torch.compile during forward and backward (slower here: off)
    attention_kernel: str = "flash"  # flash: flash attention called directly (GPU); sdpa: torch's dispatcher
    soup_device: str = "auto"  # auto: the training device; cpu: host accumulator (memory-checked)
    eval_batch_rows: int = 1
    phase: str = "formal"
    reference: float | None = None  # a same-protocol reference final score (data root 004's: 74.568936)
    out_dir: str | None = None
    db_url: str | None = None
    export_root: str | None = None
    run_id: str | None = None
    sets: dict = field(default_factory=dict)  # the --set overrides, recorded on the run

    @property
    def soup(self) -> bool:
        return self.members > 1

    @property
    def member_steps(self) -> int:
        return self.steps_per_member or self.max_steps


# `--model tiny` is the CPU demo: the seed's recipe at a size that runs in minutes on 2 cores
# (applied before the user's --set, and recorded on the run like any override).
TINY_SETTINGS = {"grad_accum": "8", "max_steps": "64", "save_at": "32", "max_length": "256", "lr": "2e-3",
                 "lora_rank": "16", "lora_alpha": "32", "proxy_rows": "128"}

# settings whose default is None, with a value of the type they take
NULLABLE = {"wall_clock": 0.0, "steps_per_member": 0, "grad_checkpointing": False, "pack": False, "reference": 0.0}


def apply_sets(opts: RMOptions, sets: dict) -> RMOptions:
    """`--set key=value` overrides, typed by the field's default."""
    from train.settings import coerce

    names = {f.name: f for f in dataclasses.fields(RMOptions)}
    changes = {}
    for key, value in sets.items():
        if key not in names or key in ("sets", "db_url", "export_root", "out_dir", "run_id"):
            raise TerminalError(f"--set {key}: not a reward-model setting. Known: "
                                + ", ".join(n for n in names if n not in ("sets", "db_url", "export_root")))
        current = getattr(opts, key)
        if key == "save_at":
            changes[key] = tuple(int(v) for v in value.split(",") if v.strip())
        elif current is None and key in NULLABLE:
            changes[key] = coerce(key, value, NULLABLE[key])
        else:
            changes[key] = coerce(key, value, current)
    return dataclasses.replace(opts, **changes, sets={**opts.sets, **sets})


@dataclass
class Clock:
    """The wall-clock budget: training must stop by start + wall_clock - reserve."""

    wall_clock: float | None
    reserve: float
    start: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        if self.wall_clock is None:
            return math.inf
        return self.wall_clock - self.reserve - self.elapsed()

    def exhausted(self) -> bool:
        return self.left() <= 0


@dataclass
class RMReport:
    run_id: str
    stop_reason: str
    steps: int
    members: int
    train_seconds: float
    artifacts: list
    evaluations: list
    data_errors: list


def run_rm(opts: RMOptions, log=print) -> RMReport:
    """Train, soup, score and publish one reward-model run (see the module docstring)."""
    from train.rm.publish import Publisher
    from train.run_state import recording

    clock = Clock(opts.wall_clock, opts.reserve)
    ctx = _setup(opts, log)
    publisher = Publisher.open(opts, ctx, log)
    with recording(opts.db_url, "train rm", log) as life:  # started, beats, ended (run_state)
        life.start(ctx.run_id)
        stop, progress, done_members, train_s = _train(opts, ctx, clock, publisher, log)
        evaluations = _final_evaluations(opts, ctx, publisher, log)
        publisher.finish(stop_reason=stop, steps=progress, members=done_members, train_seconds=train_s,
                         wall_clock=opts.wall_clock, reserve=opts.reserve, total_seconds=clock.elapsed(),
                         steps_per_member=opts.member_steps,
                         retained=sum(a.retained for a in ctx.retention.artifacts))
    return RMReport(run_id=ctx.run_id, stop_reason=stop, steps=progress, members=done_members, train_seconds=train_s,
                    artifacts=list(ctx.retention.artifacts), evaluations=ctx.evaluations + evaluations,
                    data_errors=ctx.data_errors)


@dataclass
class Context:
    """What the phases share: data, tokenizer, device, paths."""

    run_id: str
    base_path: Path
    out_dir: Path
    device: object
    tokenizer: object
    pairs: list  # (chosen ids, rejected ids) per training pair
    eval_rows: list
    eval_ids: list  # (chosen ids, rejected ids) per evaluation row
    proxy_index: list  # positions in eval_rows of the proxy subset
    data_errors: list
    retention: object
    pack: bool = True  # chosen and rejected in one row (train.rm.model), else padded
    evaluations: list = field(default_factory=list)


def _setup(opts: RMOptions, log) -> Context:
    """load_pairs and check_overlap, then tokenize everything once."""
    from train.policy.loader import pick_device
    from train.policy.threads import quiet_cpu_threads
    from train.rm import synthetic
    from train.rm.artifacts import Retention
    from train.rm.data import check_no_overlap, proxy_rows, read_eval, read_pairs
    from train.rm.model import encode, load_tokenizer
    from train.tiny.policy import resolve_model_path

    from train.rm.pair_attention import KERNELS

    if opts.attention_kernel not in KERNELS:
        raise TerminalError(f"--set attention_kernel={opts.attention_kernel}: one of {', '.join(KERNELS)}")
    chosen = "pack_tokens" in opts.sets or opts.pack_tokens != RMOptions.pack_tokens  # the class holds the default
    if opts.pack_tokens < 0 or (opts.pack is False and opts.pack_tokens and chosen):  # the default gives way
        raise TerminalError(f"--set pack_tokens={opts.pack_tokens}: pairs share a row only in the packed layout; "
                            "use 0 (one pair per forward) or drop --set pack=false")
    pairs_path, eval_path = Path(opts.pairs or synthetic.PAIRS_FILE), Path(opts.eval or synthetic.EVAL_FILE)
    pairs, rows = read_pairs(pairs_path), read_eval(eval_path)
    for error in pairs.errors + rows.errors:
        log(f"Warning: skipped {error}")
    checked = check_no_overlap(pairs.rows, rows.rows, pairs_path, eval_path)
    log(f"Pairs: {len(pairs.rows)} from {pairs_path}; evaluation rows: {len(rows.rows)} from {eval_path}; "
        f"zero prompt overlap over all {checked} pairs.")
    device = pick_device(opts.device)
    if device.type == "cpu":
        quiet_cpu_threads()
    base_path = resolve_model_path(opts.model, log=log)
    tokenizer = load_tokenizer(base_path)
    enc = lambda messages: encode(tokenizer, messages, opts.max_length)  # noqa: E731
    proxy = {r.id for r in proxy_rows(rows.rows, opts.proxy_rows)}
    run_id = opts.run_id or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"_rm_{opts.model if opts.model == 'tiny' else 'model'}"
    out_dir = Path(opts.out_dir or f"rm_runs/{run_id}")
    out_dir.mkdir(parents=True, exist_ok=True)
    return Context(run_id=run_id, base_path=base_path, out_dir=out_dir, device=device, tokenizer=tokenizer,
                   pack=opts.pack is not False,
                   pairs=[(enc(p.chosen), enc(p.rejected)) for p in pairs.rows], eval_rows=rows.rows,
                   eval_ids=[(enc(r.chosen), enc(r.rejected)) for r in rows.rows],
                   proxy_index=[i for i, r in enumerate(rows.rows) if r.id in proxy],
                   data_errors=pairs.errors + rows.errors, retention=Retention(opts.keep))


def _train(opts, ctx, clock, publisher, log):
    """Every member in turn; returns (stop reason, progress, finished members, train seconds)."""
    from train.rm.soup import RunningMean, check_host_memory

    soup, progress, last_member_s, train_start = None, 0, 0.0, time.monotonic()
    for member in range(opts.members):
        if member and clock.left() < last_member_s:
            log(f"Stopping before member {member + 1}: {clock.left():.0f} s left, a member took {last_member_s:.0f} s.")
            return STOP_WALL_CLOCK, progress, member, time.monotonic() - train_start
        started = time.monotonic()
        model, finished = train_member(opts, ctx, member, progress, clock, publisher, log)
        progress += finished
        if finished < opts.member_steps:  # the budget ran out mid-member
            if not opts.soup and finished and progress not in opts.save_at:
                _save_adapter(opts, ctx, model, progress, publisher, log)
            return STOP_WALL_CLOCK, progress, member, time.monotonic() - train_start
        if opts.soup:
            soup = soup or _new_soup(opts, ctx, model, RunningMean, check_host_memory)
            _soup_step(opts, ctx, model, soup, progress, publisher, log)
        elif progress not in opts.save_at:
            _save_adapter(opts, ctx, model, progress, publisher, log)
        last_member_s = time.monotonic() - started
        del model
    return STOP_COMPLETED, progress, opts.members, time.monotonic() - train_start


def train_member(opts, ctx, member: int, first_progress: int, clock, publisher, log):
    """One member from the fresh base (seed 42+m): `update` steps of accum micro-batches;
    returns (model, optimizer steps finished)."""
    import torch

    seed = opts.seed + member
    with phase(opts, "load_model", f"member {member + 1}"):
        model = member_model(opts, ctx, seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=opts.lr, weight_decay=0.0, fused=ctx.device.type == "cuda")
    schedule = _cosine(optimizer, opts.warmup_steps, opts.member_steps)
    order = _pair_order(len(ctx.pairs), seed)
    for step in range(opts.member_steps):
        if clock.exhausted():
            log(f"Wall clock: {opts.wall_clock:.0f} s less {opts.reserve:.0f} s reserve reached at progress "
                f"{first_progress + step}; stopping ({STOP_WALL_CLOCK}).")
            return model, step
        with phase(opts, "update", f"progress {first_progress + step + 1}"):
            row = update_step(opts, ctx, model, optimizer, params, order)
        schedule.step()
        progress = first_progress + step + 1
        publisher.step({"step": progress, "member": member, **row})
        if step % max(1, opts.member_steps // 8) == 0 or step + 1 == opts.member_steps:
            log(f"member {member + 1}/{opts.members} step {step + 1}/{opts.member_steps} (progress {progress}): "
                f"loss {row['loss']:.4f} acc {row['accuracy']:.3f} lr {row['lr']:.2e} {row['seconds']:.1f} s")
        if not opts.soup and progress in opts.save_at:
            _save_adapter(opts, ctx, model, progress, publisher, log)
    return model, opts.member_steps


def phase(opts, name: str, where: str, unfinished: Path | None = None):
    """A phase of the loop: a device error inside it is one line naming `name` and the setting
    to change; `unfinished`, the artifact directory it writes, is removed then."""
    from train.device_errors import guarded, rm_device_error_line

    return guarded(lambda exc: rm_device_error_line(name, exc, opts, where), unfinished)


def member_model(opts, ctx, seed: int):
    """The base with a fresh head and fresh LoRA drawn from `seed`, checkpointing as set, in
    train mode."""
    from train.rm.model import LoraSpec, add_lora, load_reward_model

    model = add_lora(load_reward_model(ctx.base_path, ctx.device, seed, ctx.tokenizer.pad_token_id),
                     LoraSpec(opts.lora_rank, opts.lora_alpha, opts.lora_dropout))
    if opts.fuse_lora:
        from train.learn.lora import fuse_lora

        fuse_lora(model)
    if opts.grad_checkpointing if opts.grad_checkpointing is not None else ctx.device.type == "cuda":
        kwargs = {"use_reentrant": False}
        if opts.selective_checkpointing:
            from train.learn.lora import save_attention_policy

            kwargs["context_fn"] = save_attention_policy()
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        model.enable_input_require_grads()
    model.train()
    return model


def update_step(opts, ctx, model, optimizer, params, order) -> dict:
    """One optimizer step over `grad_accum` pairs: the Bradley-Terry loss, averaged. Pairs go
    one per forward, or several per packed row (`pack_tokens`): the loss is a sum over pairs,
    so the gradients are the same either way."""
    import torch
    import torch.nn.functional as F

    from train.learn.lora import compiled_norms, lora_input_casts_off
    from train.rm.model import packed_rewards, pair_attention, pair_rewards

    _reset_peak(ctx.device)
    start = time.perf_counter()
    loss_sum, correct = 0.0, 0
    pairs = [ctx.pairs[next(order)] for _ in range(opts.grad_accum)]
    with (pair_attention(model, ctx.pack, opts.attention_kernel),  # these three hold for backward too
          lora_input_casts_off(model, opts.lora_bf16_inputs), compiled_norms(model, opts.compile_norms)):
        for pack in _packs(pairs, opts.pack_tokens if ctx.pack else 0):  # the padded layout: one pair each
            with _autocast(ctx.device):
                if ctx.pack:
                    r_chosen, r_rejected = packed_rewards(model, pack, ctx.device)  # (k,) each
                else:  # TRL's padded two-row batch: one pair (pack_tokens needs the packed layout)
                    r_chosen, r_rejected = (r[None] for r in pair_rewards(model, *pack[0], ctx.device, pack=False))
            losses = -F.logsigmoid(r_chosen.float() - r_rejected.float())  # (k,)
            (losses.sum() / opts.grad_accum).backward()
            loss_sum += losses.sum().item()
            correct += int((r_chosen > r_rejected).sum().item())
    grad_norm = torch.nn.utils.clip_grad_norm_(params, opts.max_grad_norm).item()
    lr = optimizer.param_groups[0]["lr"]
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return {"loss": loss_sum / opts.grad_accum, "accuracy": correct / opts.grad_accum, "lr": lr,
            "grad_norm": grad_norm, "seconds": time.perf_counter() - start, "peak_mem_gib": _peak(ctx.device),
            "pairs": opts.grad_accum}


def _autocast(device):
    """bf16 compute over the fp32 LoRA weights on GPU (as TRL's bf16=True); nothing on CPU.
    With `lora_bf16_inputs`, peft's fp32 cast of each LoRA input is off (same products under
    autocast, without an fp32 copy of the activations per adapted layer)."""
    import torch

    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")


def _packs(pairs: list, budget: int) -> list[list]:
    """Consecutive pairs grouped while their packed tokens stay within `budget` (a pair longer
    than the budget goes alone); budget 0: one pair per group."""
    from train.rm.model import packed_length

    packs, size = [], 0
    for pair in pairs:
        n = packed_length(*pair)
        if packs and budget and size + n <= budget:
            packs[-1].append(pair)
            size += n
        else:
            packs.append([pair])
            size = n
    return packs


def _cosine(optimizer, warmup_steps: int, total: int):
    """Warmup, then cosine down to 0 (train.learn.schedule), as a factor of the optimizer's rate
    by LambdaLR's 0-based step: the first step after the warmup is at the peak."""
    import torch

    def factor(step: int) -> float:
        if step < warmup_steps:
            return warmup(1.0, step + 1, warmup_steps)
        return cosine(1.0, (step - warmup_steps) / max(1, total - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _pair_order(n: int, seed: int):
    """Pair indices, a fresh seeded shuffle each epoch."""
    rng = random.Random(seed)
    while True:
        order = list(range(n))
        rng.shuffle(order)
        yield from order


def _reset_peak(device) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.reset_peak_memory_stats(device)


def _peak(device) -> float:
    """Peak memory of the step in GiB: CUDA allocator peak, else the process's peak RSS."""
    if device.type == "cuda":
        import torch

        return torch.cuda.max_memory_allocated(device) / 2**30
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _save_adapter(opts, ctx, model, progress, publisher, log):
    from train.rm.artifacts import save_adapter

    out = ctx.out_dir / f"artifact_{progress:05d}"
    with phase(opts, "save_checkpoint", f"progress {progress}", unfinished=out):
        artifact = save_adapter(model, out, progress)
    _publish_artifact(opts, ctx, artifact, publisher, log)


def _new_soup(opts, ctx, model, RunningMean, check_host_memory):
    import torch

    device = ctx.device if opts.soup_device == "auto" else torch.device(opts.soup_device)
    if device.type == "cpu":
        check_host_memory(sum(p.numel() for p in model.parameters()))
    return RunningMean(device)


def _soup_step(opts, ctx, model, soup, progress, publisher, log):
    """soup_accumulate the merged member, soup_export the cumulative snapshot."""
    from train.rm.artifacts import Artifact

    out = ctx.out_dir / f"artifact_{progress:05d}"
    with phase(opts, "soup_accumulate_export", f"progress {progress}", unfinished=out):
        seconds, n_params = soup_accumulate_export(model, soup, out)
    artifact = Artifact(progress=progress, path=out, kind="full_model", dtype="bfloat16", parameters=n_params,
                        members=soup.members, seconds=seconds)
    log(f"Soup of {soup.members} member(s) exported at progress {progress} in {seconds:.1f} s.")
    _publish_artifact(opts, ctx, artifact, publisher, log)


def soup_accumulate_export(model, soup, out: Path) -> tuple[float, int]:
    """Merge the member's LoRA, fold it into the running mean, export the mean as bf16:
    (seconds, parameters)."""
    start = time.perf_counter()
    merged = model.merge_and_unload()
    soup.add(merged.state_dict())
    n_params = soup.export(merged, out)
    return time.perf_counter() - start, n_params


def _publish_artifact(opts, ctx, artifact, publisher, log):
    """Retain it (dropping the oldest beyond `keep`), record it, and score it on the proxy."""
    for dropped in ctx.retention.add(artifact):
        publisher.artifact(dropped)
        log(f"Dropped artifact at progress {dropped.progress} (at most {opts.keep} retained).")
    ctx.evaluations += evaluate(opts, ctx, artifact, "proxy", publisher, log)
    publisher.artifact(artifact)


def _final_evaluations(opts, ctx, publisher, log) -> list:
    """The final evaluator on every retained artifact (its proxy rows reported alongside)."""
    out = []
    for artifact in sorted((a for a in ctx.retention.artifacts if a.retained), key=lambda a: a.progress):
        out += evaluate(opts, ctx, artifact, "full", publisher, log)
    return out


def evaluate(opts, ctx, artifact, split: str, publisher, log) -> list[dict]:
    """Load the artifact and score it: `proxy` (the fixed subset), or `full` (every row, plus
    the proxy-row diagnostic from the same rewards). Each result is published with a receipt."""
    from ingest.rm_layout import write_evaluation_files

    from train.rm.scoring import FINAL_EVALUATOR, PROXY_EVALUATOR, score_rows

    start = time.perf_counter()
    index = ctx.proxy_index if split == "proxy" else list(range(len(ctx.eval_rows)))
    with phase(opts, "evaluate", f"progress {artifact.progress}"):
        rewards = _rewards(opts, ctx, artifact, index, log)
    if rewards is None:
        return []
    seconds = time.perf_counter() - start
    results = []
    splits = [("proxy", ctx.proxy_index)] if split == "proxy" else [("full", index), ("proxy_rows", ctx.proxy_index)]
    for name, rows in splits:
        score = score_rows([ctx.eval_rows[i] for i in rows], [rewards[i][0] for i in rows], [rewards[i][1] for i in rows])
        evaluator = PROXY_EVALUATOR.format(n=len(ctx.proxy_index)) if split == "proxy" else FINAL_EVALUATOR
        summary = {"evaluation_id": f"{opts.phase}_p{artifact.progress:05d}_{name}", "job": opts.phase,
                   "phase": opts.phase, "progress": artifact.progress, "evaluator": evaluator, "split": name,
                   "direction": "maximize", "n": score.n, "score": round(score.score, 4), "se": round(score.se, 4),
                   "seconds": round(seconds, 3), "accuracy": round(score.accuracy, 6), "members": artifact.members,
                   "sections": {s: {"score": round(v["score"], 4), "n": v["n"]} for s, v in score.sections.items()}}
        path, receipt = write_evaluation_files(ctx.out_dir, summary, complete=True)  # finished: receipt too
        publisher.evaluation(summary, path, receipt)
        log(f"{evaluator} [{name}] at progress {artifact.progress}: {score.score:.4f} +/- {score.se:.4f} (n={score.n})")
        results.append(summary)
    return results


def _rewards(opts, ctx, artifact, index: list[int], log) -> dict | None:
    """{row: (chosen reward, rejected reward)} of the artifact on those evaluation rows; None
    (and the artifact marked not loadable) when it does not load."""
    import torch

    from train.rm.artifacts import load_artifact
    from train.rm.model import pair_attention, pair_rewards

    try:
        model = load_artifact(artifact, ctx.base_path, ctx.device, ctx.tokenizer.pad_token_id)
        artifact.loadable = True
    except TerminalError as exc:
        artifact.loadable = False
        log(f"Warning: {exc}; not scored.")
        return None
    rewards = {}
    with torch.no_grad(), pair_attention(model, ctx.pack, opts.attention_kernel):
        for i in index:
            with _autocast(ctx.device):
                r_c, r_r = pair_rewards(model, *ctx.eval_ids[i], ctx.device, ctx.pack)
            rewards[i] = (r_c.item(), r_r.item())
    return rewards
