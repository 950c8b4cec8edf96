"""What the trainers take: `train run`'s options and knobs, and the `--set key=value` parsing
both trainers share (`train rm` types its own fields with :func:`coerce`).

A run's settings are the arm's (warehouse/arms.py) with `--set` overrides, plus the knobs
below, which no arm states. `settings_of` resolves them into one `Settings` (with each one's
source: arm, --set, run, default or flag) and checks every one before anything loads. The overrides, and the step's controls when learning, are recorded
on the run row (`resolve_settings`), each with its source (`recorded_sources`,
runs.settings_sources), so a run says everything it did differently and why.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from train.writer import LOCK_WAIT_S
from warehouse.arms import Arm, get_arm
from warehouse.errors import TerminalError

TINY_RESPONSE_CAP = 256  # the tiny policy's scripts are ~60-120 tokens
DEFAULT_LR = 3e-5  # when the arm does not state one (NULL in the registry)
# The tiny policy's default: LoRA r32 on a 2M-parameter model (hidden 192) needs larger steps;
# at 3e-5 it does not move in a handful of rounds, at 3e-3 its valid rate rises within two
# (benchmarks/RESULTS.md, "Learning"), at 1e-2 it falls apart.
TINY_LR = 3e-3


@dataclass
class RunOptions:
    """Everything `train run` takes; `sets` are the `--set key=value` overrides."""

    arm: str = "hr24k_u6"
    model: str = "tiny"
    rounds: int = 2
    tasks: tuple = ()  # empty: the arm's tasks
    tasks_root: str | None = None
    seed: int = 0
    db_url: str | None = None
    device: str = "auto"
    backend: str = "auto"  # auto | hf | vllm (train.generate.choice)
    export_root: str | None = None
    spool_root: str | None = None
    lock_wait_s: float = LOCK_WAIT_S  # the run row's and each round's wait for another process's lock, then the spool
    learn: bool = True
    checkpoint_root: str | None = None  # save the adapter + optimizer after each step
    checkpoint_every: int = 1  # steps between checkpoints (train.learn.checkpoint)
    quiet: bool = False  # only the run, round and step lines (no per-expansion lines)
    health_gate: bool = True  # stop after the first step when the health gate fails (docs/metrics.md)
    decision_steps: tuple = ()  # print the decision rule's reading after these steps
    sets: dict = field(default_factory=dict)
    exec_workers: int | None = None
    exec_gpus: tuple | None = None  # GPUs for nodes that declare one; None: those the policy leaves
    tiny_cache: str | None = None
    run_id: str | None = None
    first_round: int | None = None  # default: 1, or the resume step + 1
    resume_from: str | None = None  # "RUN:STEP": continue RUN's trees (and checkpoint) after round STEP
    unsafe_no_sandbox: bool = False  # run nodes even without bubblewrap (train.env.sandbox.require_sandbox)


@dataclass
class Knobs:
    """Run settings beyond the arm's, all settable with `--set`."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    draft_prob: float = 0.25
    softmax_temperature: float = 0.5
    initial_drafts: int = 1
    exec_timeout_s: float = 120.0
    # execute a sibling group as soon as it has ended while the round's other groups generate:
    # auto = when generation runs on a GPU (on CPU the two would share the same cores)
    overlap_exec: str = "auto"  # auto | on | off
    tensor_parallel_size: int = 1  # vLLM only: GPUs one generation engine spans
    # vLLM only: how the engine sees each step's weights (merged: loaded in place, LoRA merged in;
    # lora: the adapter served under a new id; auto: merged in one process, lora under tensor
    # parallelism) and whether it frees its GPU memory while the update runs (auto: on a GPU)
    vllm_weight_sync: str = "auto"  # auto | merged | lora
    vllm_sleep: str = "auto"  # auto | on | off
    update_epochs: int = 1  # optimizer steps per round over the round's nodes (PPO epochs)
    clip_eps: float = 0.2  # policy loss: importance ratio clipped to [1 - eps, 1 + eps]
    kl_coef: float = 0.001  # weight of the k3 KL penalty to the reference (adapter off); the start when adaptive
    # stability for long runs (train.learn.control)
    lr_schedule: str = "constant"  # constant | cosine, after the warmup
    lr_warmup_steps: int = 0  # linear warmup from 0 over this many steps
    lr_total_steps: int = 0  # cosine: the step where the rate reaches lr_min_ratio x (0: the run's last round)
    lr_min_ratio: float = 0.1
    kl_target: float = 0.0  # > 0: adapt kl_coef toward this mean KL per step (0: fixed kl_coef)
    kl_horizon: float = 1.0  # steps over which the controller applies a full proportional correction
    kl_max: float = 0.0  # > 0: stop the run after a step whose KL is above it
    entropy_min: float = 0.0  # > 0: stop the run after a step whose entropy is below it
    entropy_max: float = 0.0  # > 0: stop the run after a step whose entropy is above it
    # the update's variant (train.learn.variant; recorded in step_metrics each step)
    keep_layers: int = -1  # decoder layers not checkpointed; -1: as many as the memory left after generation fits
    compile_norms: str = "auto"  # auto | on | off: RMSNorms compiled during update_actor (auto: on a GPU)
    # one GPU holding what each phase needs (train.policy.offload): host = the policy's frozen base
    # weights in pinned host memory while the engine generates, copied back for the step
    policy_offload: str = "off"  # off | host
    # benchmarks on random weights (train.generate.lengths, train.policy.loader): each completion's
    # length forced from a named mix (off | arm | cap); the model directory's config only, the
    # trainer's weights drawn on the device and the engine's dummy ones replaced by them before round 1
    bench_lengths: str = "off"
    bench_random_weights: bool = False
    # the fit check before loading (train.fit): the device's memory in GiB (0: read it from the device)
    device_memory_gib: float = 0.0


STABILITY_RECORDED = ("lr_schedule", "lr_warmup_steps", "kl_coef", "kl_target")


@dataclass(frozen=True)
class Settings:
    """A run's settings, resolved and checked: the arm with its overrides, the knobs, the
    overrides as the run row records them, and where each setting came from (`sources`: "arm",
    "--set", "run" for the values the run picks itself, "default" for a knob left as is, "flag"
    for `train run`'s own options)."""

    arm: Arm
    knobs: Knobs
    overrides: dict
    sources: dict

    def source(self, key: str) -> str:
        return self.sources.get(key, "default")


def resolve_settings(opts: RunOptions) -> tuple[Arm, Knobs, dict]:
    """(arm with overrides, knobs, overrides as recorded on the run row)."""
    settings = settings_of(opts)
    return settings.arm, settings.knobs, settings.overrides


def settings_of(opts: RunOptions, ranks: int = 1) -> Settings:
    """Every setting of the run, each checked against its type and allowed values, before
    anything loads: a bad one stops here in one line naming it and its source. `ranks`: the
    processes `--nproc` starts."""
    arm, knobs, recorded, sources = _resolve(opts)
    settings = Settings(arm, knobs, recorded, sources)
    check_settings(settings, opts, ranks)
    return settings


def _resolve(opts: RunOptions) -> tuple[Arm, Knobs, dict, dict]:
    arm, knobs = get_arm(opts.arm), Knobs()
    overrides = dict(opts.sets)
    sources = {f.name: "flag" for f in dataclasses.fields(RunOptions) if f.name != "sets"}
    sources.update({f.name: "arm" for f in dataclasses.fields(Arm)})
    sources.update({key: "--set" for key in opts.sets})
    if opts.model == "tiny" and "response_cap" not in overrides and arm.response_cap is not None:
        overrides["response_cap"] = min(arm.response_cap, TINY_RESPONSE_CAP)
        sources["response_cap"] = "run"
    if opts.learn and arm.learning_rate is None and "learning_rate" not in overrides:
        overrides["learning_rate"] = TINY_LR if opts.model == "tiny" else DEFAULT_LR
        sources["learning_rate"] = "run"
    arm_fields = {f.name: f for f in dataclasses.fields(Arm)}
    knob_fields = {f.name: f for f in dataclasses.fields(Knobs)}
    arm_sets = {k: coerce(k, v, getattr(arm, k)) for k, v in overrides.items() if k in arm_fields}
    knob_sets = {k: coerce(k, v, getattr(knobs, k)) for k, v in overrides.items() if k in knob_fields}
    unknown = set(overrides) - set(arm_fields) - set(knob_fields) - {"name"}
    if unknown or "name" in overrides:
        known = sorted((set(arm_fields) | set(knob_fields)) - {"name", "question_id", "notes"})
        raise TerminalError(f"--set: unknown or fixed setting(s) {', '.join(sorted(unknown or {'name'}))}; "
                            f"settable: {', '.join(known)}")
    recorded = {**arm_sets, **knob_sets}
    knobs = dataclasses.replace(knobs, **knob_sets)
    check_mismatch_limits(arm_sets)
    if opts.learn:  # the step's controls are part of what a run did, set or not
        recorded = {**recorded, **{k: getattr(knobs, k) for k in STABILITY_RECORDED}}
    return arm.with_overrides(**arm_sets), knobs, jsonable(recorded), sources


def choices() -> dict:
    """The allowed values of each knob that names a choice."""
    from train.generate.lengths import MIXES
    from train.learn.control import SCHEDULES
    from train.policy.offload import OFFLOADS

    auto_on_off = ("auto", "on", "off")
    return {"overlap_exec": auto_on_off, "vllm_weight_sync": ("auto", "merged", "lora"), "vllm_sleep": auto_on_off,
            "compile_norms": auto_on_off, "policy_offload": OFFLOADS, "bench_lengths": MIXES,
            "lr_schedule": SCHEDULES}


#: (knob, test, what it needs): the ranges the loop's parts would refuse later
RANGES = (
    ("update_epochs", lambda v: v >= 1, "needs at least 1"),
    ("keep_layers", lambda v: v >= -1, "use -1 (as many as fit) or a count of layers"),
    ("lr_warmup_steps", lambda v: v >= 0, "needs to be >= 0"),
    ("lr_min_ratio", lambda v: 0.0 <= v <= 1.0, "a ratio in [0, 1]"),
    ("kl_coef", lambda v: v >= 0, "needs to be >= 0"),
    ("kl_target", lambda v: v >= 0, "needs to be >= 0 (0: a fixed kl_coef)"),
    ("kl_horizon", lambda v: v > 0, "needs to be > 0"),
)


def check_settings(settings: Settings, opts: RunOptions, ranks: int = 1) -> None:
    """The knobs' allowed values and ranges, checked where they are resolved (before the model,
    the tokenizer or the warehouse is touched); the error names the setting and its source."""
    knobs = settings.knobs
    for key in choices():
        check_choice(knobs, key, settings)
    for key, ok, needs in RANGES:
        value = getattr(knobs, key)
        if value is None or not ok(value):
            raise TerminalError(f"{setting_label(settings, key, value)}: {needs}")
    if opts.backend == "vllm" and ranks > 1:  # train.generate.choice's refusal, before the ranks start
        from train.generate.choice import vllm_with_ranks

        raise vllm_with_ranks(f"--nproc {ranks}")
    if opts.learn and knobs.policy_offload != "off" and opts.backend != "auto" and not own_weights(opts.backend):
        raise TerminalError(f"{setting_label(settings, 'policy_offload', knobs.policy_offload)}: the {opts.backend} "
                            "backend generates with the policy's own weights; use --backend vllm or policy_offload=off")
    if opts.learn and knobs.lr_schedule == "cosine" and (knobs.lr_total_steps or not opts.resume_from):
        total = knobs.lr_total_steps or (opts.first_round or 1) + opts.rounds - 1
        if total <= knobs.lr_warmup_steps:
            raise TerminalError(f"{setting_label(settings, 'lr_schedule', 'cosine')}: its total steps ({total}) must "
                                f"exceed lr_warmup_steps ({knobs.lr_warmup_steps}); raise --rounds or --set lr_total_steps")


def check_choice(knobs: Knobs, key: str, settings: Settings | None = None) -> str:
    """The knob `key`'s value, refused in one line when it is not one of its choices."""
    value, allowed = getattr(knobs, key), choices()[key]
    if value not in allowed:
        label = setting_label(settings, key, value) if settings is not None else f"--set {key}={value}"
        raise TerminalError(f"{label}: use {', '.join(allowed[:-1])} or {allowed[-1]}")
    return value


def own_weights(backend: str) -> bool:
    """Whether `backend` ("hf" or "vllm", as --backend names it) loads weights of its own."""
    from train.generate.choice import backend_class

    return backend_class(backend).capabilities.own_weights


def setting_label(settings: Settings, key: str, value) -> str:
    """`key=value` as its source gave it: `--set key=value`, `arm NAME: key=value`, ..."""
    source = settings.source(key)
    if source == "--set":
        return f"--set {key}={value}"
    if source == "arm":
        return f"arm {settings.arm.name}: {key}={value}"
    return f"{key}={value} ({source})"


def check_mismatch_limits(sets: dict) -> None:
    """--set mismatch_max (>= 1: 1 is exact agreement) and mismatch_share_gt1_max (a share)."""
    most, share = sets.get("mismatch_max"), sets.get("mismatch_share_gt1_max")
    if most is not None and most < 1:
        raise TerminalError(f"--set mismatch_max={most}: needs at least 1 (1 is exact agreement of sampler and trainer)")
    if share is not None and not 0 <= share <= 1:
        raise TerminalError(f"--set mismatch_share_gt1_max={share}: a share of tokens, in [0, 1]")


def parse_sets(pairs: tuple[str, ...] | list[str]) -> dict:
    """`key=value` strings to a dict (values parsed by `coerce` later, against the field)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise TerminalError(f"--set {pair!r}: expected key=value, e.g. --set response_cap=4096")
        out[key.strip()] = value.strip()
    return out


def coerce(key: str, value, current):
    """`value` converted to the type of the setting's current value; a clear error otherwise."""
    if not isinstance(value, str):
        return value
    try:
        if isinstance(current, bool):
            return {"true": True, "1": True, "false": False, "0": False}[value.lower()]
        if isinstance(current, tuple) or key == "tasks":
            return tuple(v.strip() for v in value.split(",") if v.strip())
        if isinstance(current, int) or key.endswith(("_cap", "_rank", "_alpha", "per_round", "per_expansion")):
            return None if value.lower() in ("none", "null") else int(value)
        if isinstance(current, float) or key in ("learning_rate", "gpu_memory_utilization", "mismatch_max",
                                                 "mismatch_share_gt1_max"):
            return None if value.lower() in ("none", "null") else float(value)
    except (KeyError, ValueError):
        raise TerminalError(f"--set {key}={value}: not a valid {type(current).__name__}") from None
    return value


def jsonable(values: dict) -> dict:
    """`values` as they read back from JSON (tuples become lists): what the run row records."""
    return json.loads(json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}))


def resolve_tasks(arm: Arm, opts: RunOptions, overrides: dict, log) -> tuple[dict, dict, str]:
    """The tasks to run (name -> Task); falls back to the bundled tasks when the arm's are absent."""
    from train.env import bundled_task_names, load_task
    from train.env.errors import TaskNotFoundError

    wanted = tuple(opts.tasks) or arm.tasks
    try:
        tasks = {name: load_task(name, opts.tasks_root) for name in wanted}
        notes = ""
    except TaskNotFoundError:
        if opts.tasks:
            raise
        bundled = bundled_task_names()
        log(f"Notice: the arm's tasks are not under {opts.tasks_root or 'the bundled tasks'}; "
            f"using the bundled mini tasks instead ({', '.join(bundled)}).")
        tasks = {name: load_task(name) for name in bundled}
        notes = f"arm tasks not found; ran the bundled mini tasks: {', '.join(bundled)}"
    if tuple(tasks) != arm.tasks:
        overrides = {**overrides, "tasks": list(tasks)}
    return tasks, overrides, notes


def recorded_sources(opts: RunOptions, recorded: dict, backend_asked: bool = True) -> dict:
    """Where each setting the run row records (runs.overrides) came from, for runs.settings_sources:
    settings_of's source for the arm's and the knobs' (arm, --set, run, default), and for the keys
    the run adds itself: its tasks (--tasks, or the bundled ones it fell back to), its backend
    (--backend when `backend_asked`, else the run's pick: `auto`), the checkpoint flags; any other
    (the backend's version, the model directory) is the run's own pick."""
    settings = settings_of(opts)
    added = {"tasks": "flag" if opts.tasks else "run", "backend": "flag" if backend_asked else "run",
             "checkpoint_dir": "flag", "checkpoint_every": "flag"}
    known = {f.name for f in dataclasses.fields(Arm)} | {f.name for f in dataclasses.fields(Knobs)}
    return {key: added[key] if key in added else settings.source(key) if key in known else "run"
            for key in recorded}


def check_warehouse(db_url: str) -> None:
    """Fail before any work when the warehouse `--db` names is missing or not at the newest
    schema (both trainers call it before they load a model)."""
    from warehouse.db import connect
    from warehouse.revision import require_head

    with connect(db_url, read_only=True) as con:
        require_head(con, db_url)
