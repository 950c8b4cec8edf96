"""`train run`: tree-search GRPO rounds, written straight into the warehouse.

One loop, top to bottom. Per round: `gen` (tree-search rollouts on every task: expansions of
`siblings` completions, executed and graded), then the GRPO step (`old_log_prob`, `ref`,
`adv`, `update_actor` inside :func:`train.learn.step.grpo_step`), `update_weights` (make the
generator see the new weights) and `save_checkpoint`; then the round, and its step's timing
row, are committed to the warehouse in one transaction.

Where this departs from textbook GRPO (DeepSeekMath):
- the "prompt" of a group is a tree-search expansion (draft, improve or debug, seeds 000/002),
  and its 16 siblings are the group: the reward is the competition's humanrank percentile for
  a valid node and a fixed sentinel otherwise (-0.5 failed, -0.2 idle, -1.0 infrastructure);
- rollouts come from a search that reuses earlier rounds' nodes as parents, so the policy is
  trained on its own search tree, not on a fixed prompt set;
- advantages are `grpo_valid_only` (mean-only, no std; see train.learn);
- one optimizer step per round (the round is the batch), the reference model is the base
  with the LoRA adapter disabled.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone

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
    backend: str = "hf"  # hf | vllm
    export_root: str | None = None
    spool_root: str | None = None
    learn: bool = True
    checkpoint_root: str | None = None  # save the adapter + optimizer after each step
    checkpoint_every: int = 1  # steps between checkpoints (train.learn.checkpoint)
    quiet: bool = False  # only the run, round and step lines (no per-expansion lines)
    health_gate: bool = True  # stop after the first step when METRICS.md's health gate fails
    decision_steps: tuple = ()  # print the decision rule's reading after these steps
    sets: dict = field(default_factory=dict)
    exec_workers: int | None = None
    exec_gpus: tuple | None = None  # GPUs for nodes that declare one; None: those the policy leaves
    tiny_cache: str | None = None
    run_id: str | None = None
    first_round: int | None = None  # default: 1, or the resume step + 1
    resume_from: str | None = None  # "RUN:STEP": continue RUN's trees (and checkpoint) after round STEP


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


STABILITY_RECORDED = ("lr_schedule", "lr_warmup_steps", "kl_coef", "kl_target")


@dataclass
class RunReport:
    run_id: str
    rounds: list = field(default_factory=list)  # one dict of counts per round
    spooled: list = field(default_factory=list)


def run(opts: RunOptions, log=print, monitor=None) -> RunReport:
    """Run `opts.rounds` rounds; every finished round is in the warehouse (or spooled).

    `monitor` (train.progress.LiveProgress) draws each round and step live at a terminal.
    Under torchrun every rank calls it: rank 0 does the rounds, the others generate their share
    of each generation call (train.generate.ranks) and join each GRPO step (train.distributed);
    they return an empty report."""
    from train.distributed import join_team, leave_team

    team = join_team(opts.device)
    try:
        opts = dataclasses.replace(opts, device=team.device)
        return _run(opts, team, log if team.main else _quiet, monitor if team.main else None)
    finally:
        if monitor is not None:
            monitor.close()
        leave_team(team)


def _run(opts: RunOptions, team, log, monitor=None) -> RunReport:
    from train.learn.session import after_commit
    from train.writer import RoundWrite

    check_backend(opts, team)
    arm, knobs, overrides = resolve_settings(opts)
    tasks, overrides, notes = resolve_tasks(arm, opts, overrides, log)
    resume = _resume_point(opts)
    with team.alone():  # rank 0's own work: a failure here stops every rank
        run_id = opts.run_id or new_run_id(arm.name)
        trees = _trees(opts, tasks, resume) if team.main else None  # before the model: a bad resume point fails fast
        base = _resumed_update_base(opts, resume) if team.main else None
        writer = _writer(opts, arm, run_id, overrides, notes, resume, log) if team.main else None
        if writer is not None:
            writer.claim()  # the run row, before round 1: a second run with this id stops here
        log(f"Run {run_id}: arm {arm.name}, model {opts.model}, tasks {', '.join(tasks)}, seed {opts.seed}")
        _prepare_model(opts, team, log)
    run_id, base = team.share((run_id, base))
    policy = _load_policy(opts, arm, log)
    generator = _generation_copy(policy, opts) if team.sharded and opts.learn else policy
    learner = _learner(policy, arm, overrides, opts, resume, team, knobs, base) if opts.learn else None
    if learner is not None and team.sharded:
        _sync_generator(generator, learner, team)
    progress = None if opts.quiet or monitor is not None else log
    with team.alone():
        backend = _generation_backend(opts, arm, knobs, generator, team, progress)
        ctx = _round_context(opts, arm, knobs, tasks, backend, run_id, log, progress, monitor) if team.main else None
    first = opts.first_round or (resume.step + 1 if resume else 1)
    report = RunReport(run_id)
    for round_no in range(first, first + opts.rounds):
        timer = GuardedTimer(arm, round_no, watch=monitor)
        with team.alone():
            if monitor is not None:
                monitor.round_started(round_no, arm.expansions_per_round, len(tasks))
            with timer.phase("gen"):
                result = _generate_round(round_no, trees, ctx, team, backend)
        step = None
        if learner is not None:
            if monitor is not None:
                monitor.step_started(round_no)
            samples = team.share(round_samples(result) if team.main else None)
            metrics = learner.step(samples, timer, round_no)  # adv, old_log_prob, ref, update_actor
            with timer.phase("update_weights"):
                _update_weights(backend, learner, opts, run_id, round_no, team, generator, log)
            if opts.checkpoint_root and round_no % max(opts.checkpoint_every, 1) == 0:
                with timer.phase("save_checkpoint"):
                    learner.save(opts.checkpoint_root, run_id, round_no)
            step = timer.row(round_no)
            log(f"Step {round_no}: " + ", ".join(f"{k} {v:.4g}" for k, v in metrics.items()
                                                   if isinstance(v, (int, float)) and v is not None))
        if not team.main:
            continue
        if monitor is not None:
            monitor.round_finished()
        with team.alone():
            where = writer.write(RoundWrite(round_no, result.records, result.summaries, step))
            report.rounds.append(_round_line(round_no, result, where, log))
            if learner is not None and where == "db":  # step_metrics row, then gates read from the warehouse
                after_commit(opts.db_url, run_id, round_no, metrics,
                             health_gate=opts.health_gate and round_no == first,
                             decision_steps=opts.decision_steps, log=log)
            if learner is not None:
                learner.check_band(round_no, metrics)
    team.finish()
    report.spooled = writer.spooled if writer is not None else []
    return report


# --- device errors: one line naming the phase and the setting ------------------------------

ADVICE = {
    "gen": "lower --set gpu_memory_utilization=... (the KV pool's share of the GPU, now {util}) or "
           "--set response_cap=... (now {response_cap})",
    "old_log_prob": "lower --set response_cap=... (now {response_cap}; a micro-batch holds total_cap = {total_cap} tokens)",
    "ref": "lower --set response_cap=... (now {response_cap}; a micro-batch holds total_cap = {total_cap} tokens)",
    "adv": "lower --set response_cap=... (now {response_cap})",
    "update_actor": "lower --set response_cap=... (now {response_cap}; a micro-batch holds total_cap = {total_cap} "
                    "tokens, with activations for the backward pass)",
    "update_weights": "lower --set gpu_memory_utilization=... (now {util}; the generator's share of the GPU)",
    "save_checkpoint": "free GPU memory held by other processes, or lower --set gpu_memory_utilization=... (now {util})",
}


def is_device_error(exc: BaseException) -> bool:
    """Out of GPU memory, or an error raised by CUDA / its libraries."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    accelerator = getattr(torch, "AcceleratorError", ())
    if accelerator and isinstance(exc, accelerator):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(k in text for k in ("CUDA", "CUBLAS", "cuDNN", "NCCL", "out of memory"))


def device_error_line(phase: str, exc: BaseException, arm: Arm, round_no: int) -> str:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    kind = "out of GPU memory" if "out of memory" in str(exc).lower() else type(exc).__name__
    advice = ADVICE.get(phase, "see the message").format(util=arm.gpu_memory_utilization or 0.6,
                                                         response_cap=arm.response_cap, total_cap=arm.total_cap)
    return (f"round {round_no}, phase {phase}: {kind} ({first}); {advice}. "
            f"Nothing of round {round_no} was written; rerun with the changed setting (--resume-from RUN:STEP continues after the last written round).")


class GuardedTimer:
    """The round's PhaseTimer; an OOM or CUDA error inside any phase (gen, old_log_prob, ref,
    update_actor, update_weights, save_checkpoint) becomes one TerminalError line naming the
    phase and the setting to change. The round's rows are written after every phase, in one
    transaction, so nothing of a failed round lands."""

    def __init__(self, arm: Arm, round_no: int, watch=None):
        from train.learn.timing import PhaseTimer

        self._timer, self.arm, self.round_no = PhaseTimer(watch=watch), arm, round_no
        self.seconds = self._timer.seconds

    @contextlib.contextmanager
    def phase(self, name: str):
        from train.generate.paged import KVBudgetError

        try:
            with self._timer.phase(name):
                yield
        except KVBudgetError as exc:
            raise TerminalError(f"round {self.round_no}, phase {name}: {exc}") from None
        except Exception as exc:
            if not is_device_error(exc):
                raise
            raise TerminalError(device_error_line(name, exc, self.arm, self.round_no)) from None

    def row(self, step: int) -> dict:
        return self._timer.row(step)


def check_backend(opts: RunOptions, team) -> None:
    """vLLM cannot start inside a torchrun world of several ranks: it takes torch.distributed's
    world for its own and fails ('world_size (N) is not equal to tensor_model_parallel_size')."""
    if opts.backend == "vllm" and team.size > 1:
        raise TerminalError(f"--backend vllm with {team.size} ranks: vLLM cannot start inside a multi-rank "
                            "torchrun run. Use --backend hf with several ranks, or one process with "
                            "--backend vllm --set tensor_parallel_size=N for generation over N GPUs.")


def _quiet(line: str) -> None:
    """The log of ranks other than 0: rank 0 speaks for the run."""


# --- settings --------------------------------------------------------------------------

def resolve_settings(opts: RunOptions) -> tuple[Arm, Knobs, dict]:
    """(arm with overrides, knobs, overrides as recorded on the run row)."""
    arm, knobs = get_arm(opts.arm), Knobs()
    overrides = dict(opts.sets)
    if opts.model == "tiny" and "response_cap" not in overrides and arm.response_cap is not None:
        overrides["response_cap"] = min(arm.response_cap, TINY_RESPONSE_CAP)
    if opts.learn and arm.learning_rate is None and "learning_rate" not in overrides:
        overrides["learning_rate"] = TINY_LR if opts.model == "tiny" else DEFAULT_LR
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
    if opts.learn:  # the step's controls are part of what a run did, set or not
        recorded = {**recorded, **{k: getattr(knobs, k) for k in STABILITY_RECORDED}}
    return arm.with_overrides(**arm_sets), knobs, _jsonable(recorded)


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
        if isinstance(current, float) or key in ("learning_rate", "gpu_memory_utilization"):
            return None if value.lower() in ("none", "null") else float(value)
    except (KeyError, ValueError):
        raise TerminalError(f"--set {key}={value}: not a valid {type(current).__name__}") from None
    return value


def _jsonable(values: dict) -> dict:
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


def new_run_id(arm: str, now: datetime | None = None) -> str:
    """`<UTC time to the microsecond>_<6 random hex digits>_<arm>`, e.g.
    `20261201_021530_123456_3f9a0c_hr24k_u6`: sorts by start time, and runs started in the
    same microsecond (a seed sweep launched from a script) still differ. The warehouse claim
    (train.writer) refuses any id already there."""
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%d_%H%M%S_%f}_{secrets.token_hex(3)}_{arm}"


# --- the pieces of the loop ----------------------------------------------------------

def _resume_point(opts: RunOptions):
    if not opts.resume_from:
        return None
    from train.learn.checkpoint import parse_resume

    return parse_resume(opts.resume_from)


def _resumed_update_base(opts: RunOptions, resume) -> tuple[int, int] | None:
    """The update's measured base (largest micro-batch, peak above the step's start, of a step
    that kept no layers) from the resumed lineage's `step_metrics`, so that a resumed process
    keeps layers from its first step instead of measuring again (train.learn.variant)."""
    if resume is None or not opts.learn:
        return None
    import json

    from train.learn.variant import resumed_base
    from train.rollout.lineage import lineage
    from warehouse.db import connect

    with connect(opts.db_url, read_only=True) as con:
        extras = [extra for run, last in lineage(con, resume.run_id, resume.step) for (extra,) in con.execute(
            'SELECT "extra" FROM "step_metrics" WHERE "run_id" = ? AND "step" <= ? ORDER BY "step"',
            [run, last]).fetchall() if extra]
    return resumed_base([json.loads(e) if isinstance(e, str) else e for e in extras])


def _trees(opts: RunOptions, tasks: dict, resume) -> dict:
    """Empty trees, or the resumed lineage's trees as they stood after round `resume.step`."""
    from train.rollout.tree import TaskTree

    if resume is None:
        return {name: TaskTree(name) for name in tasks}
    from train.rollout.lineage import load_trees

    return load_trees(opts.db_url, resume.run_id, resume.step, tasks)


def _load_policy(opts: RunOptions, arm: Arm, log):
    from train.policy.loader import load_policy

    lora = (arm.lora_rank, arm.lora_alpha) if opts.learn else None
    return load_policy(opts.model, opts.device, lora=lora, tiny_cache=opts.tiny_cache, log=log)


def _round_context(opts: RunOptions, arm: Arm, knobs: Knobs, tasks: dict, backend, run_id: str, log,
                   progress=None, monitor=None):
    from train.env import Limits, LocalExecutor
    from train.generate.base import SamplingConfig
    from train.rollout.round import RoundContext
    from train.rollout.tree import SearchSettings

    sampling = SamplingConfig(max_new_tokens=arm.response_cap or 4096, prompt_cap=arm.prompt_cap,
                              total_cap=arm.total_cap, temperature=knobs.temperature,
                              top_p=knobs.top_p, top_k=knobs.top_k)
    settings = SearchSettings(siblings=arm.siblings_per_expansion, expansions_per_round=arm.expansions_per_round,
                              initial_drafts=knobs.initial_drafts, draft_prob=knobs.draft_prob,
                              softmax_temperature=knobs.softmax_temperature)
    for note in getattr(backend, "notes", ()):  # e.g. vLLM's length bounded by the model's
        log(note)
    return RoundContext(tasks=tasks, backend=backend, sampling=sampling,
                        settings=settings, run_seed=opts.seed, run_id=run_id, model_name=opts.model,
                        executor=LocalExecutor(opts.exec_workers, gpus=exec_gpus(opts, log)),
                        limits=Limits(timeout_s=knobs.exec_timeout_s),
                        progress=progress, monitor=monitor, overlap_exec=_overlap_exec(knobs, backend))


def _overlap_exec(knobs: Knobs, backend) -> bool:
    if knobs.overlap_exec not in ("auto", "on", "off"):
        raise TerminalError(f"--set overlap_exec={knobs.overlap_exec}: use auto, on or off")
    if knobs.overlap_exec != "auto":
        return knobs.overlap_exec == "on"
    device = getattr(backend, "device", None)
    return getattr(device, "type", None) == "cuda"


def _generation_backend(opts: RunOptions, arm: Arm, knobs: Knobs, generator, team, progress=None):
    """This rank's generation backend. With several ranks rank 0's deals each generation call
    over every rank, each on its own copy of the policy (train.generate.ranks)."""
    backend = make_backend(opts, arm, knobs, generator)
    if team.size == 1 or not team.main:
        return backend
    from train.generate.ranks import DealtBackend

    return DealtBackend(team, backend, log=progress)


def _generate_round(round_no: int, trees, ctx, team, backend):
    """Rank 0 runs the round (its backend deals each call over the ranks, and it executes and
    records the nodes); every other rank generates its shares until rank 0 has the round."""
    from train.generate.ranks import end_generation, serve_generation
    from train.rollout.round import run_round

    if not team.main:
        serve_generation(team, backend)
        return None
    result = run_round(round_no, trees, ctx)
    end_generation(team)
    return result


def exec_gpus(opts: RunOptions, log) -> list[int]:
    """--exec-gpus, else every GPU of the machine the policy's ranks do not use."""
    if opts.exec_gpus is not None:
        return list(opts.exec_gpus)
    from train.distributed import launched_world
    from train.env.gpu import default_exec_gpus

    if opts.device == "cpu":
        policy = set()
    elif opts.device.startswith("cuda:"):
        policy = {int(opts.device.split(":", 1)[1])}
    else:  # cuda / auto: each rank on its local index (a plain process: GPU 0)
        policy = set(range(launched_world()[1]))
    gpus = default_exec_gpus(policy)
    if gpus:
        log(f"Nodes that declare a GPU run on GPU {', '.join(map(str, gpus))} (--exec-gpus to change).")
    return gpus


def make_backend(opts: RunOptions, arm: Arm, knobs: Knobs, policy):
    if opts.backend == "vllm":
        from train.generate.vllm_backend import VLLMBackend

        return VLLMBackend(str(policy.path), policy.tokenizer, gpu_memory_utilization=arm.gpu_memory_utilization or 0.6,
                           max_model_len=arm.total_cap, seed=opts.seed, device=str(policy.device),
                           tensor_parallel_size=knobs.tensor_parallel_size, temperature=knobs.temperature)
    from train.generate.hf import HFBackend

    return HFBackend(policy.model, policy.tokenizer, gpu_memory_utilization=arm.gpu_memory_utilization or 0.6)


def round_samples(result) -> list:
    """The learner's view of a round: every sibling is a sample of its group."""
    from train.learn.step import Sample

    return [Sample(c.prompt_token_ids, c.response_token_ids, r["reward"], r["sibling_group"])
            for task in result.records for r, c in zip(result.records[task], result.completions[task])]


@dataclass
class Learner:
    """The GRPO step's call site (train.learn owns the step itself), with the run's learning-rate
    schedule and KL control (train.learn.control)."""

    policy: object
    optimizer: object
    config: object
    schedule: object = None  # LRSchedule; None: the optimizer's rate as it is
    kl: object = None  # KLControl; None: the config's fixed coefficient
    band: object = None  # Band: the KL / entropy bounds checked after the round is written
    variants: object = None  # UpdateVariants: kept layers and compiled norms per step; None: as prepared

    def step(self, samples: list, timer, step_no: int = 1) -> dict:
        """One GRPO step on the round's samples (every rank calls it under FSDP): the rate of
        step `step_no`, the coefficient in force; the next coefficient is set from its KL."""
        from train.learn.control import current_coef, set_step_state

        lr = self.schedule.at(step_no) if self.schedule else self.optimizer.param_groups[0]["lr"]
        coef = current_coef(self.optimizer, self.kl) if self.kl else self.config.loss.kl_coef
        set_step_state(self.optimizer, lr, coef)
        config = dataclasses.replace(self.config, loss=dataclasses.replace(self.config.loss, kl_coef=coef))
        if self.variants is None:
            return self._grpo_step(samples, config, timer, lr, coef)
        variant, memory, device = self._choose_variant()
        config = dataclasses.replace(config, compile_norms=variant.compile_norms)
        metrics = self._grpo_step(samples, config, timer, lr, coef)
        return {**metrics, **self._record_variant(variant, memory, device, metrics)}

    def _grpo_step(self, samples: list, config, timer, lr: float, coef: float) -> dict:
        from train.learn.control import set_step_state
        from train.learn.step import grpo_step

        metrics = grpo_step(self.policy.model, self.optimizer, samples, config, timer)
        if self.kl:  # every rank reads the same all-reduced KL: the coefficient stays in step
            set_step_state(self.optimizer, lr, self.kl.next_coef(coef, metrics.get("kl")))
        return {**metrics, "kl_coef": coef}

    def _choose_variant(self) -> tuple:
        """This step's variant from the memory free at its start (after generation); its kept
        layers are set on the model now, its compiled norms travel in the step's config."""
        from train.learn.lora import keep_last_layers
        from train.learn.variant import StepMemory

        device = next(self.policy.model.parameters()).device
        memory = StepMemory.now(device)
        variant = self.variants.choose(device.type, memory.free)
        keep_last_layers(self.policy.model, variant.keep_layers)
        return variant, memory, device

    def _record_variant(self, variant, memory, device, metrics: dict) -> dict:
        from train.learn.variant import variant_metrics

        peak = memory.peak_above(device)
        self.variants.measured(variant, metrics.get("largest_micro_batch"), peak)
        return variant_metrics(variant, memory, peak)

    def check_band(self, step_no: int, metrics: dict) -> None:
        """Stop (after the round is in the warehouse) when the step left the KL / entropy band."""
        from train.learn.control import StabilityStopError

        reason = self.band.error(step_no, metrics) if self.band else None
        if reason:
            raise StabilityStopError(reason)

    def save(self, root: str, run_id: str, step: int):
        from train.learn.checkpoint import save_checkpoint

        return save_checkpoint(root, run_id, step, self.policy.model, self.optimizer)


def _update_weights(backend, learner: Learner, opts: RunOptions, run_id: str, round_no: int, team=None,
                    generator=None, log=_quiet) -> None:
    """Make the generator sample from the updated policy. The transformers backend shares the
    module, so it already does; vLLM gets the adapter saved and served under a fresh id.
    Under FSDP the adapter is gathered (every rank) and loaded into every rank's generation copy."""
    if team is not None and team.sharded:
        return _update_sharded(backend, learner, opts, run_id, round_no, team, generator, log)
    if not hasattr(backend, "set_adapter"):
        return
    root = _served_adapter_dir(opts, run_id, round_no)
    learner.policy.model.save_pretrained(root)
    _serve(backend, root, log)


def _serve(backend, adapter_dir, log) -> None:
    adapter_id = backend.set_adapter(str(adapter_dir))
    log(f"  update_weights: the adapter is served as LoRA id {adapter_id} ({adapter_dir})")


def _served_adapter_dir(opts: RunOptions, run_id: str, round_no: int):
    import tempfile
    from pathlib import Path

    return Path(opts.checkpoint_root or tempfile.gettempdir()) / run_id / f"served_adapter_{round_no}"


def _update_sharded(backend, learner: Learner, opts: RunOptions, run_id: str, round_no: int, team, generator,
                    log=_quiet):
    state = _sync_generator(generator, learner, team)
    if team.main and hasattr(backend, "set_adapter"):
        root = _served_adapter_dir(opts, run_id, round_no)
        learner.policy.model.save_pretrained(root, state_dict=state)
        _serve(backend, root, log)


def _generation_copy(policy, opts: RunOptions):
    """This rank's unsharded policy for generation (FSDP shards the training one; every rank
    generates its share of each call); taken before the learner prepares and shards it. vLLM
    loads its own weights: no copy."""
    if opts.backend == "vllm":
        return policy
    import copy

    return dataclasses.replace(policy, model=copy.deepcopy(policy.model))


def _sync_generator(generator, learner: Learner, team) -> dict:
    """Gather the adapter (a collective: every rank calls it) and load it into this rank's
    generation copy, so every rank samples from rank 0's weights; returns the gathered state."""
    from train.learn.fsdp import full_adapter_state

    state = full_adapter_state(learner.policy.model)
    if generator is not None and generator.model is not learner.policy.model:
        result = generator.model.load_state_dict(state, strict=False)
        if result.unexpected_keys:
            raise TerminalError(f"the generation copy lacks adapter weights {result.unexpected_keys[:3]}")
    return state


def _prepare_model(opts: RunOptions, team, log) -> None:
    """Rank 0 resolves (for `tiny`: builds) the model before the other ranks load it."""
    if team.sharded and team.main:
        from train.policy.loader import resolve_model_path

        resolve_model_path(opts.model, opts.tiny_cache, log=log)


def _learner(policy, arm: Arm, overrides: dict, opts: RunOptions, resume=None, team=None,
             knobs: Knobs | None = None, base: tuple[int, int] | None = None) -> Learner:
    """Prepare (and under FSDP shard) the policy, then the optimizer over its adapter, then the
    checkpoint when resuming (the optimizer must see the sharded parameters). `base`: the update's
    peak measured by the resumed run (`_resumed_update_base`)."""
    from train.learn.lora import make_optimizer

    if resume is not None and not opts.checkpoint_root:
        raise TerminalError("--resume-from with learning needs --checkpoint-dir holding "
                            f"{resume.run_id}/global_step_{resume.step} (or pass --no-learn).")
    knobs = knobs or Knobs()
    config = step_config(arm, knobs)
    variants = prepare_update(policy.model, knobs, config, sharded=team is not None and team.sharded)
    variants.base = base
    if team is not None and team.sharded:
        from train.learn.fsdp import shard_policy

        shard_policy(policy.model)
    optimizer = make_optimizer(policy.model, overrides.get("learning_rate") or arm.learning_rate)
    if resume is not None:
        from train.learn.checkpoint import load_checkpoint

        load_checkpoint(opts.checkpoint_root, resume, policy.model, optimizer)
    first = opts.first_round or (resume.step + 1 if resume else 1)
    lr = overrides.get("learning_rate") or arm.learning_rate
    return Learner(policy, optimizer, config, *stability(knobs, lr, first + opts.rounds - 1), variants=variants)


def prepare_update(model, knobs: Knobs, config, sharded: bool = False):
    """Ready `model` for the update as the loop runs it: selective checkpointing (attention
    outputs kept), fused LoRA; returns the per-step chooser of kept layers and compiled norms
    (train.learn.variant) for micro-batches up to the config's token budget."""
    from train.learn.lora import prepare_for_training
    from train.learn.variant import ModelShape, UpdateVariants

    prepare_for_training(model, selective=True)
    return UpdateVariants(ModelShape.of(model), config.token_budget, variant_setting(knobs), sharded=sharded)


def variant_setting(knobs: Knobs):
    """--set keep_layers / compile_norms as the chooser's setting (None: auto)."""
    from train.learn.variant import VariantSetting

    if knobs.keep_layers is None or knobs.keep_layers < -1:
        raise TerminalError(f"--set keep_layers={knobs.keep_layers}: use -1 (as many as fit) or a count of layers")
    if knobs.compile_norms not in ("auto", "on", "off"):
        raise TerminalError(f"--set compile_norms={knobs.compile_norms}: use auto, on or off")
    keep = None if knobs.keep_layers == -1 else knobs.keep_layers
    return VariantSetting(keep, None if knobs.compile_norms == "auto" else knobs.compile_norms == "on")


def stability(knobs: Knobs, lr: float, last_step: int) -> tuple:
    """(schedule, KL control, band) from the knobs; the schedule's base rate is `lr`."""
    from train.learn.control import Band, KLControl, LRSchedule

    schedule = LRSchedule(base=lr, warmup_steps=knobs.lr_warmup_steps, kind=knobs.lr_schedule,
                          total_steps=knobs.lr_total_steps or last_step, min_ratio=knobs.lr_min_ratio)
    return (schedule, KLControl(knobs.kl_coef, target=knobs.kl_target, horizon=knobs.kl_horizon),
            Band(knobs.kl_max, knobs.entropy_min, knobs.entropy_max))


def step_config(arm: Arm, knobs: Knobs):
    """The GRPO step's settings: the micro-batch budget covers the arm's total cap."""
    from train.learn.loss import LossConfig
    from train.learn.step import StepConfig

    if knobs.update_epochs < 1:
        raise TerminalError(f"--set update_epochs={knobs.update_epochs}: needs at least 1")
    return StepConfig(token_budget=max(arm.total_cap or 0, 4096), epochs=knobs.update_epochs,
                      loss=LossConfig(clip_eps=knobs.clip_eps, kl_coef=knobs.kl_coef))


def _writer(opts: RunOptions, arm: Arm, run_id: str, overrides: dict, notes: str, resume, log):
    from train.writer import RoundWriter, RunRow

    resumed = {"run": resume.run_id, "step": resume.step} if resume else None
    row = RunRow(run_id=run_id, arm=arm.name, question_id=arm.question_id, model=opts.model,
                 seed=opts.seed, overrides=overrides, notes=notes, resumed_from=resumed)
    return RoundWriter(opts.db_url, row, export_root=opts.export_root, spool_root=opts.spool_root, log=log)


def _round_line(round_no: int, result, where: str, log) -> dict:
    records = result.all_records()
    counts = {"round": round_no, "nodes": len(records),
              "executed": sum(r.get("exec_time") is not None for r in records),
              "valid": sum(r["status"] == "ok" for r in records),
              "drafts": sum(r["mode"] == "draft" for r in records),
              "best_reward": max((r["reward"] for r in records), default=None), "written_to": where}
    log(f"Round {round_no}: {counts['nodes']} nodes generated, {counts['executed']} executed, "
        f"{counts['valid']} valid, {counts['drafts']} drafts, best reward {counts['best_reward']:.3f} "
        f"(gen {result.gen_seconds:.0f} s, exec {result.exec_seconds:.0f} s) -> {where}")
    return counts
