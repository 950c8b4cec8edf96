"""The pieces `train run`'s loop is made of, each built from the run's settings, and
:func:`set_up`, which builds them all before round 1 (:class:`Pieces`): the settings checked,
the tasks, the run row claimed, the policy, its learner (train.learn.learner) and generation
backend, the round context (sampling, search, executor, limits), the search trees (empty, or a
resumed lineage's). The pieces also carry what the loop asks of them between its phases: the
round's timer, the engine's sleep, `update_weights`, whether a checkpoint is due, the step's
row, the gates once a round is written. Heavy imports stay inside the functions, so importing
the loop stays light.
"""
from __future__ import annotations

import dataclasses
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from warehouse.arms import Arm
from warehouse.errors import TerminalError

from train.settings import Knobs, RunOptions, check_choice, recorded_sources, resolve_settings

if TYPE_CHECKING:
    from train.device_errors import GuardedTimer
    from train.learn.checkpoint import ResumePoint
    from train.learn.learner import Learner
    from train.policy.loader import Policy
    from train.policy.offload import BaseOffload
    from train.rollout.round import RoundContext
    from train.writer import RoundWriter


@dataclass
class Pieces:
    """One rank's pieces of the run, built by :func:`set_up`. Rank 0 (the one process) has them
    all; another rank has no trees, writer or round context: it generates its shares of rank
    0's calls and joins each step."""

    opts: RunOptions
    arm: Arm
    tasks: dict  # name -> Task
    run_id: str
    backend: object  # train.generate: the policy's (under several ranks, rank 0's deals each call)
    learner: Learner | None  # None: --no-learn
    trees: dict | None = None  # task -> TaskTree, the search so far (rank 0)
    writer: RoundWriter | None = None  # the run's warehouse writes (rank 0)
    ctx: RoundContext | None = None  # what a round is run with (rank 0)
    generator: Policy | None = None  # the policy the backend samples from (a copy under FSDP)
    offload: BaseOffload | None = None  # --set policy_offload=host
    first_round: int = 1
    version: int = 0  # the global step of the weights the generator samples from at the first round
    monitor: object = None  # train.progress.LiveProgress, or None

    @property
    def watch(self):
        """The monitor the loop tells of each round and step: the live one, else one that draws nothing."""
        from train.progress import Unwatched

        return self.monitor if self.monitor is not None else Unwatched()

    @property
    def rounds(self) -> range:
        return range(self.first_round, self.first_round + self.opts.rounds)

    def timer(self, round_no: int) -> GuardedTimer:
        """The round's phase timer (its device errors are one line naming the phase)."""
        from train.device_errors import GuardedTimer

        return GuardedTimer(self.arm, round_no, watch=self.monitor)

    def sleep_engine(self) -> None:
        """After `gen` when learning: the engine frees its GPU memory for the step (vLLM's sleep mode)."""
        if self.learner is not None and self.backend.capabilities.sleep:
            self.backend.sleep()

    def base_to_device(self, log) -> None:
        """Before the step, with --set policy_offload=host: the base weights come back on the device."""
        if self.offload is not None:
            moved, seconds = timed(self.offload.restore)
            log(f"  policy offload: {moved / 2**30:.1f} GiB of base weights back on the device in {seconds:.1f} s")

    def update_weights(self, round_no: int, team, log) -> None:
        """`update_weights`: the generator samples from the weights of step `round_no` (train.weight_sync)."""
        from train.weight_sync import update_weights

        if self.offload is not None:  # the merged sync reads the base from the host copy
            freed, seconds = timed(self.offload.offload)
            log(f"  policy offload: {freed / 2**30:.1f} GiB of base weights off the device in {seconds:.1f} s")
        update_weights(self.backend, self.learner, self.opts, self.run_id, round_no, team, self.generator, log)

    def checkpoint_due(self, round_no: int) -> bool:
        return bool(self.opts.checkpoint_root) and round_no % max(self.opts.checkpoint_every, 1) == 0

    def step_row(self, timer: GuardedTimer, round_no: int, metrics: dict, log) -> dict:
        """The step's timing row (the `steps` table), its one line logged."""
        from train.progress import step_line

        step = timer.row(round_no)
        log(step_line(round_no, metrics, step.get("total_s") if step else None))
        return step

    def after_write(self, round_no: int, metrics: dict, where: str, log) -> None:
        """Once the round and its step are written: the gates that read them from the warehouse
        (the health gate after the run's first step, the decision rule at --decision-steps),
        then the KL / entropy band (train.learn.control)."""
        from train.learn.session import after_commit

        if where == "db":
            after_commit(self.opts.db_url, self.run_id, round_no,
                         health_gate=self.opts.health_gate and round_no == self.first_round,
                         decision_steps=self.opts.decision_steps, log=log)
        self.learner.check_band(round_no, metrics)


def run_life(opts: RunOptions, team, log):
    """The run's life in the warehouse (train.run_state.recording: started, a heartbeat, ended),
    recorded by rank 0 alone."""
    from train.run_state import recording

    return recording(opts.db_url if team.main else None, "train run", log)


def set_up(opts: RunOptions, team, life, log, monitor=None) -> Pieces:
    """Everything before round 1, on every rank (train.distributed's `team`): the settings checked
    (before anything loads), the run row claimed and its life started (`life`,
    train.run_state.RunLife), the model's fit checked, the policy and its learner, then the
    generation backend; a backend with weights of its own gets the resumed ones."""
    from train.generate.choice import choose_backend
    from train.run_state import checkpoint_settings
    from train.settings import resolve_tasks

    choice = choose_backend(opts.backend, opts.device, team.size)
    opts = dataclasses.replace(opts, backend=choice.name)
    arm, knobs, overrides = resolve_settings(opts)  # with the chosen backend: checks what needs it
    overrides = {**overrides, **choice.recorded(), **checkpoint_settings(opts)}
    tasks, overrides, notes = resolve_tasks(arm, opts, overrides, log)
    resume = resume_point(opts)
    with team.alone():
        run_id = opts.run_id or new_run_id(arm.name)
        trees, base, writer = _rank_0_pieces(opts, arm, tasks, run_id, overrides, notes, resume, team, life, log,
                                             backend_asked=choice.asked)
        log(f"Run {run_id}: arm {arm.name}, model {opts.model}, tasks {', '.join(tasks)}, seed {opts.seed}")
        log(f"Generation: {choice.name} {choice.version or ''} ({choice.reason})")
        prepare_model(opts, team, log)
    run_id, base = team.share((run_id, base))
    if team.main:  # before loading: a phase that cannot fit stops the run here, in one line
        fit_check(opts, arm, knobs, choice.name, len(tasks), log)
    generator, learner, offload = _load(opts, arm, knobs, overrides, resume, base, team, log)
    if writer is not None:  # the token view decodes the run's tokens with this directory's tokenizer
        writer.run.overrides = {**writer.run.overrides, "model_dir": str(generator.path.resolve())}
    first = opts.first_round or (resume.step + 1 if resume else 1)
    pieces = Pieces(opts, arm, tasks, run_id, None, learner, trees=trees, writer=writer, generator=generator,
                    offload=offload, first_round=first, monitor=monitor,
                    # the resumed adapter's step, else the base's
                    version=resume.step if learner is not None and resume is not None else 0)
    progress = None if opts.quiet or monitor is not None else log
    with team.alone():
        pieces.backend = deal_over_ranks(make_backend(opts, arm, knobs, pieces.generator), team, progress)
        pieces.ctx = round_context(opts, arm, knobs, tasks, pieces.backend, run_id, log, progress, monitor) \
            if team.main else None
    if learner is not None and (resume is not None or knobs.bench_random_weights) \
            and pieces.backend.capabilities.own_weights:
        from train.weight_sync import update_weights

        # the backend loaded the base model (or dummy weights): it must sample from the policy's
        update_weights(pieces.backend, learner, opts, run_id, first - 1, team, generator, log)
    return pieces


def _rank_0_pieces(opts: RunOptions, arm: Arm, tasks: dict, run_id: str, overrides: dict, notes: str,
                   resume: ResumePoint | None, team, life, log, backend_asked: bool) -> tuple:
    """(trees, the resumed update's base, writer) on rank 0, the run row claimed; Nones elsewhere."""
    if not team.main:
        return None, None, None
    from train.learn.learner import resumed_update_base

    trees = initial_trees(opts, tasks, resume)  # before the model: a bad resume point fails fast
    base = resumed_update_base(opts, resume)
    writer = make_writer(opts, arm, run_id, overrides, notes, resume, log, backend_asked)
    writer.claim()  # the run row, before round 1: a second run with this id stops here
    life.start(run_id)
    return trees, base, writer


def _load(opts: RunOptions, arm: Arm, knobs: Knobs, overrides: dict, resume: ResumePoint | None, base, team,
          log) -> tuple:
    """(the policy the backend samples from, its learner, the base weights' offload): the policy
    loaded, its generation copy under FSDP, the learner made (and sharded) from it."""
    from train.learn.learner import make_learner
    from train.weight_sync import generation_copy, sync_generator

    policy = load_run_policy(opts, arm, log)
    generator = generation_copy(policy, opts) if team.sharded and opts.learn else policy
    learner = make_learner(policy, arm, overrides, opts, resume, team, knobs, base) if opts.learn else None
    if learner is not None and team.sharded:
        sync_generator(generator, learner, team)
    return generator, learner, base_offload(knobs, opts, learner, log)  # before the engine sizes its memory


def new_run_id(arm: str, now: datetime | None = None) -> str:
    """`<UTC time to the microsecond>_<6 random hex digits>_<arm>`, e.g.
    `20261201_021530_123456_3f9a0c_hr24k_u6`: sorts by start time, and runs started in the
    same microsecond (a seed sweep launched from a script) still differ. The warehouse claim
    (train.writer) refuses any id already there."""
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%d_%H%M%S_%f}_{secrets.token_hex(3)}_{arm}"


def fit_check(opts: RunOptions, arm, knobs, backend: str, tasks: int, log):
    """train.fit's estimate of each phase's peak for this model, arm and device."""
    from train.fit import check_fit
    from train.tiny.policy import resolve_model_path

    if opts.device == "cpu" and not knobs.device_memory_gib:
        return None
    rows = arm.siblings_per_expansion * arm.expansions_per_round * tasks
    return check_fit(resolve_model_path(opts.model, opts.tiny_cache, log=log), arm, knobs, opts, backend, rows, log)


def timed(fn):
    """(fn(), seconds it took)."""
    import time

    start = time.perf_counter()
    return fn(), time.perf_counter() - start


def base_offload(knobs, opts: RunOptions, learner, log):
    """`--set policy_offload=host`: the policy's frozen base weights to pinned host memory now
    (train.policy.offload), or None. Only where the engine has weights of its own."""
    from train.policy.offload import BaseOffload, check_offload

    if check_offload(knobs.policy_offload) == "off" or learner is None:
        return None
    offload = BaseOffload(learner.policy.model)
    freed = offload.offload()
    log(f"Policy offload: {freed / 2**30:.1f} GiB of frozen base weights in host memory while the engine generates")
    return offload


def resume_point(opts: RunOptions) -> ResumePoint | None:
    """`--resume-from RUN:STEP` as given; `--resume-from RUN`: its latest step, the newest one
    with its round in the warehouse and (when learning) its checkpoint under the run's
    checkpoint directory."""
    if not opts.resume_from:
        return None
    from train.learn.checkpoint import ResumePoint, parse_resume

    if ":" in opts.resume_from:
        return parse_resume(opts.resume_from)
    return ResumePoint(opts.resume_from, latest_step(opts, opts.resume_from))


def latest_step(opts: RunOptions, run_id: str) -> int:
    from train.learn.checkpoint import saved_steps
    from warehouse.db import connect

    with connect(opts.db_url, read_only=True) as con:
        last_round = con.execute('SELECT max("round") FROM "nodes" WHERE "run_id" = ?', [run_id]).fetchone()[0]
    if last_round is None:
        raise TerminalError(f"--resume-from {run_id}: the warehouse holds no round of run {run_id!r}; "
                            "'warehouse --db DB sql \"SELECT run_id FROM runs\"' lists the runs.")
    if not opts.learn:
        return last_round
    steps = [n for n in saved_steps(opts.checkpoint_root or "", run_id) if n <= last_round] \
        if opts.checkpoint_root else []
    if not steps:
        raise TerminalError(f"--resume-from {run_id}: no checkpoint of run {run_id} under "
                            f"{opts.checkpoint_root or '(no --checkpoint-dir)'}; pass the --checkpoint-dir "
                            f"it ran with, or --no-learn --resume-from {run_id}:{last_round} to continue "
                            "its trees without its learning.")
    return steps[-1]


def initial_trees(opts: RunOptions, tasks: dict, resume: ResumePoint | None) -> dict:
    """Empty trees, or the resumed lineage's trees as they stood after round `resume.step`."""
    from train.rollout.tree import TaskTree

    if resume is None:
        return {name: TaskTree(name) for name in tasks}
    from train.rollout.lineage import load_trees

    return load_trees(opts.db_url, resume.run_id, resume.step, tasks)


def make_writer(opts: RunOptions, arm: Arm, run_id: str, overrides: dict, notes: str,
                resume: ResumePoint | None, log, backend_asked: bool) -> RoundWriter:
    from train.writer import RoundWriter, RunRow

    resumed = {"run": resume.run_id, "step": resume.step} if resume else None
    row = RunRow(run_id=run_id, arm=arm.name, question_id=arm.question_id, model=opts.model,
                 seed=opts.seed, overrides=overrides, notes=notes, resumed_from=resumed,
                 sources=recorded_sources(opts, overrides, backend_asked))
    return RoundWriter(opts.db_url, row, export_root=opts.export_root, spool_root=opts.spool_root,
                       lock_wait_s=opts.lock_wait_s, log=log)


def prepare_model(opts: RunOptions, team, log) -> None:
    """Rank 0 resolves (for `tiny`: builds) the model before the other ranks load it."""
    if team.sharded and team.main:
        from train.tiny.policy import resolve_model_path

        resolve_model_path(opts.model, opts.tiny_cache, log=log)


def load_run_policy(opts: RunOptions, arm: Arm, log) -> Policy:
    """The run's policy on its device, with the arm's LoRA adapter when it learns."""
    from train.policy.loader import load_policy
    from train.tiny.policy import resolve_model_path

    lora = (arm.lora_rank, arm.lora_alpha) if opts.learn else None
    knobs = resolve_settings(opts)[1]
    return load_policy(resolve_model_path(opts.model, opts.tiny_cache, log=log), opts.device, lora=lora,
                       seed=opts.seed, random_weights=knobs.bench_random_weights)


def make_backend(opts: RunOptions, arm: Arm, knobs: Knobs, policy: Policy):
    """This process's generation backend for `--backend` (train.generate)."""
    if opts.backend == "vllm":
        from train.generate.vllm_backend import VLLMBackend

        sync, sleep = vllm_settings(knobs, str(policy.device))
        return VLLMBackend(str(policy.path), policy.tokenizer, gpu_memory_utilization=arm.gpu_memory_utilization or 0.6,
                           max_model_len=arm.total_cap, seed=opts.seed, device=str(policy.device),
                           tensor_parallel_size=knobs.tensor_parallel_size, temperature=knobs.temperature,
                           weight_sync=sync, sleep=sleep and opts.learn, random_weights=knobs.bench_random_weights)
    from train.generate.hf import HFBackend

    return HFBackend(policy.model, policy.tokenizer, gpu_memory_utilization=arm.gpu_memory_utilization or 0.6)


def vllm_settings(knobs: Knobs, device: str) -> tuple[str, bool]:
    """(weight sync, sleep) for the vLLM engine from `--set vllm_weight_sync / vllm_sleep`."""
    check_choice(knobs, "vllm_weight_sync")
    check_choice(knobs, "vllm_sleep")
    sync = knobs.vllm_weight_sync
    if sync == "auto":
        sync = "merged" if knobs.tensor_parallel_size == 1 else "lora"
    sleep = device.startswith("cuda") if knobs.vllm_sleep == "auto" else knobs.vllm_sleep == "on"
    return sync, sleep


def deal_over_ranks(backend, team, progress=None):
    """`backend` as the loop uses it: with several ranks rank 0's deals each generation call
    over every rank, each on its own copy of the policy (train.generate.ranks), which takes a
    backend that generates a share of a call (`Capabilities.ranks`)."""
    if team.size == 1 or not team.main:
        return backend
    if not backend.capabilities.ranks:
        raise TerminalError(f"{type(backend).__name__} cannot generate a share of a call, so it cannot run "
                            f"on {team.size} ranks; use --backend hf with several ranks.")
    from train.generate.ranks import DealtBackend

    return DealtBackend(team, backend, log=progress)


def round_context(opts: RunOptions, arm: Arm, knobs: Knobs, tasks: dict, backend, run_id: str, log,
                  progress=None, monitor=None) -> RoundContext:
    from train.env import Limits, LocalExecutor
    from train.generate.base import SamplingConfig
    from train.generate.lengths import check_mix
    from train.rollout.round import RoundContext
    from train.rollout.tree import SearchSettings

    sampling = SamplingConfig(max_new_tokens=arm.response_cap or 4096, prompt_cap=arm.prompt_cap,
                              total_cap=arm.total_cap, temperature=knobs.temperature,
                              top_p=knobs.top_p, top_k=knobs.top_k, forced_lengths=check_mix(knobs.bench_lengths))
    settings = SearchSettings(siblings=arm.siblings_per_expansion, expansions_per_round=arm.expansions_per_round,
                              initial_drafts=knobs.initial_drafts, draft_prob=knobs.draft_prob,
                              softmax_temperature=knobs.softmax_temperature)
    for note in backend.notes:  # e.g. vLLM's length bounded by the model's
        log(note)
    return RoundContext(tasks=tasks, backend=backend, sampling=sampling,
                        settings=settings, run_seed=opts.seed, run_id=run_id, model_name=opts.model,
                        executor=LocalExecutor(opts.exec_workers, gpus=exec_gpus(opts, log)),
                        limits=Limits(timeout_s=knobs.exec_timeout_s, allow_list=not opts.unsafe_no_sandbox),
                        progress=progress, monitor=monitor, overlap_exec=overlap_exec(knobs, backend))


def overlap_exec(knobs: Knobs, backend) -> bool:
    """--set overlap_exec: auto executes finished sibling groups during generation when the
    backend generates on a GPU (on CPU the two would share the same cores)."""
    check_choice(knobs, "overlap_exec")
    if knobs.overlap_exec != "auto":
        return knobs.overlap_exec == "on"
    return backend.device is not None and backend.device.type == "cuda"


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
