"""The pieces `train run`'s loop is made of, each built from the run's settings: the policy and
its generation backend, the round context (sampling, search, executor, limits), the search
trees (empty, or a resumed lineage's), the warehouse writer. Heavy imports stay inside the
functions, so importing the loop stays light.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from warehouse.arms import Arm
from warehouse.errors import TerminalError

from train.settings import Knobs, RunOptions, check_choice, recorded_sources, resolve_settings

if TYPE_CHECKING:
    from train.learn.checkpoint import ResumePoint
    from train.policy.loader import Policy
    from train.rollout.round import RoundContext
    from train.writer import RoundWriter


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
                resume: ResumePoint | None, log) -> RoundWriter:
    from train.writer import RoundWriter, RunRow

    resumed = {"run": resume.run_id, "step": resume.step} if resume else None
    row = RunRow(run_id=run_id, arm=arm.name, question_id=arm.question_id, model=opts.model,
                 seed=opts.seed, overrides=overrides, notes=notes, resumed_from=resumed,
                 sources=recorded_sources(opts, overrides))
    return RoundWriter(opts.db_url, row, export_root=opts.export_root, spool_root=opts.spool_root, log=log)


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
