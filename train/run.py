"""`train run`: tree-search GRPO rounds, written straight into the warehouse.

One loop, top to bottom. Per round: `gen` (tree-search rollouts on every task: expansions of
`siblings` completions, executed and graded), then the GRPO step (`old_log_prob`, `ref`,
`adv`, `update_actor` inside :func:`train.learn.step.grpo_step`), `update_weights` (make the
generator see the new weights) and `save_checkpoint`; then the round, its step's timing row
and metrics are committed to the warehouse in one transaction (or spooled together).

Where this departs from textbook GRPO (DeepSeekMath):
- the "prompt" of a group is a tree-search expansion (draft, improve or debug, data roots 000/002),
  and its 16 siblings are the group: the reward is the competition's humanrank percentile for
  a valid node and a fixed sentinel otherwise (-0.5 failed, -0.2 idle, -1.0 infrastructure);
- rollouts come from a search that reuses earlier rounds' nodes as parents, so the policy is
  trained on its own search tree, not on a fixed prompt set;
- advantages are `grpo_valid_only` (mean-only, no std; see train.learn);
- one optimizer step per round (the round is the batch), the reference model is the base
  with the LoRA adapter disabled.
"""
from __future__ import annotations

import dataclasses
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone

from train.device_errors import GuardedTimer
from train.generate.choice import choose_backend
from train.factories import (deal_over_ranks, initial_trees, load_run_policy, make_backend,
                             make_writer, prepare_model, resume_point, round_context)
from train.learn.learner import make_learner, record_round, resumed_update_base, round_samples
from train.progress import step_line
from train.run_state import checkpoint_settings
from train.settings import RunOptions, resolve_settings, resolve_tasks
from train.weight_sync import generation_copy, sync_generator, update_weights
from warehouse.vocabulary import DRAFT, OK, PROMPT_ERROR_EXC_TYPE


@dataclass
class RunReport:
    run_id: str
    rounds: list = field(default_factory=list)  # one dict of counts per round
    spooled: list = field(default_factory=list)  # rounds not in the warehouse: they are in the spool
    spool_root: str | None = None
    load_command: str | None = None  # what loads the spool into the warehouse


def run(opts: RunOptions, log=print, monitor=None) -> RunReport:
    """Run `opts.rounds` rounds; every finished round is in the warehouse (or spooled).

    `monitor` (train.progress.LiveProgress) draws each round and step live at a terminal.
    Under torchrun every rank calls it: rank 0 does the rounds, the others generate their share
    of each generation call (train.generate.ranks) and join each GRPO step (train.distributed);
    they return an empty report."""
    from train.distributed import join_team, leave_team
    from train.run_state import recording

    team = join_team(opts.device)
    try:
        opts = dataclasses.replace(opts, device=team.device)
        with recording(opts.db_url if team.main else None, "train run", log) as life:  # started, beats, ended
            return _run(opts, team, log if team.main else _quiet, monitor if team.main else None, life)
    finally:
        if monitor is not None:
            monitor.close()
        leave_team(team)


def _run(opts: RunOptions, team, log, monitor=None, life=None) -> RunReport:
    """The loop. `team.alone()` marks rank 0's own work (a failure there stops every rank);
    `team.share` hands rank 0's value to every rank."""
    from train.learn.session import after_commit
    from train.learn.store import step_metrics_record
    from train.writer import RoundWrite

    # --- set-up: settings, tasks, the run row, the policy, its learner and backend
    choice = choose_backend(opts.backend, opts.device, team.size)
    opts = dataclasses.replace(opts, backend=choice.name)
    arm, knobs, overrides = resolve_settings(opts)  # with the chosen backend: checks what needs it
    overrides = {**overrides, **choice.recorded(), **checkpoint_settings(opts)}
    tasks, overrides, notes = resolve_tasks(arm, opts, overrides, log)
    resume = resume_point(opts)
    with team.alone():
        run_id = opts.run_id or new_run_id(arm.name)
        trees = initial_trees(opts, tasks, resume) if team.main else None  # before the model: a bad resume point fails fast
        base = resumed_update_base(opts, resume) if team.main else None
        writer = make_writer(opts, arm, run_id, overrides, notes, resume, log) if team.main else None
        if writer is not None:
            writer.claim()  # the run row, before round 1: a second run with this id stops here
            if life is not None:
                life.start(run_id)
        log(f"Run {run_id}: arm {arm.name}, model {opts.model}, tasks {', '.join(tasks)}, seed {opts.seed}")
        log(f"Generation: {choice.name} {choice.version or ''} ({choice.reason})")
        prepare_model(opts, team, log)
    run_id, base = team.share((run_id, base))
    if team.main:  # before loading: a phase that cannot fit stops the run here, in one line
        fit_check(opts, arm, knobs, choice.name, len(tasks), log)
    policy = load_run_policy(opts, arm, log)
    if writer is not None:  # the token view decodes the run's tokens with this directory's tokenizer
        writer.run.overrides = {**writer.run.overrides, "model_dir": str(policy.path.resolve())}
    generator = generation_copy(policy, opts) if team.sharded and opts.learn else policy
    learner = make_learner(policy, arm, overrides, opts, resume, team, knobs, base) if opts.learn else None
    if learner is not None and team.sharded:
        sync_generator(generator, learner, team)
    progress = None if opts.quiet or monitor is not None else log
    offload = base_offload(knobs, opts, learner, policy, log)  # before the engine sizes its memory
    with team.alone():
        backend = deal_over_ranks(make_backend(opts, arm, knobs, generator), team, progress)
        ctx = round_context(opts, arm, knobs, tasks, backend, run_id, log, progress, monitor) if team.main else None

    # --- the rounds: gen, then the GRPO step, then the round's rows in one transaction
    first = opts.first_round or (resume.step + 1 if resume else 1)
    if learner is not None and (resume is not None or knobs.bench_random_weights) and backend.capabilities.own_weights:
        # the backend loaded the base model (or dummy weights): it must sample from the policy's
        update_weights(backend, learner, opts, run_id, first - 1, team, generator, log)
    report = RunReport(run_id)
    # the global step of the weights the generator samples from: the resumed adapter's, else the base's
    version = resume.step if learner is not None and resume is not None else 0
    for round_no in range(first, first + opts.rounds):
        if life is not None:
            life.round_started()  # a run from here on, however it ends (train.run_state)
        timer = GuardedTimer(arm, round_no, watch=monitor)
        with team.alone():
            if monitor is not None:
                monitor.round_started(round_no, arm.expansions_per_round, len(tasks))
            with timer.phase("gen"):
                result = generate_round(round_no, trees, ctx, team, backend)
                if learner is not None and backend.capabilities.sleep:
                    backend.sleep()  # the engine frees its GPU memory for the step (vLLM's sleep mode)
        step = None
        if learner is not None:
            if monitor is not None:
                monitor.step_started(round_no)
            samples = team.share(round_samples(result) if team.main else None)
            if offload is not None:  # the engine sleeps: the base weights come back for the step
                moved, seconds = timed(offload.restore)
                log(f"  policy offload: {moved / 2**30:.1f} GiB of base weights back on the device in {seconds:.1f} s")
            metrics = learner.step(samples, timer, round_no)  # old_log_prob, ref, adv, update_actor
            if team.main:
                record_round(result, version, learner.tokens, step=round_no)
            with timer.phase("update_weights"):
                if offload is not None:  # the merged sync reads them from the host copy
                    freed, seconds = timed(offload.offload)
                    log(f"  policy offload: {freed / 2**30:.1f} GiB of base weights off the device in {seconds:.1f} s")
                update_weights(backend, learner, opts, run_id, round_no, team, generator, log)
            version = round_no
            if opts.checkpoint_root and round_no % max(opts.checkpoint_every, 1) == 0:
                with timer.phase("save_checkpoint"):
                    learner.save(opts.checkpoint_root, run_id, round_no)
            step = timer.row(round_no)
            log(step_line(round_no, metrics, step.get("total_s") if step else None))
        if not team.main:
            continue
        if learner is None:
            record_round(result, version)
        if monitor is not None:
            monitor.round_finished()
        with team.alone():
            recorded = step_metrics_record(round_no, metrics) if learner is not None else None
            where = writer.write(RoundWrite(round_no, result.records, result.summaries, step, recorded))
            report.rounds.append(round_line(round_no, result, where, log))
            if learner is not None and where == "db":  # the gates read the round from the warehouse
                after_commit(opts.db_url, run_id, round_no,
                             health_gate=opts.health_gate and round_no == first,
                             decision_steps=opts.decision_steps, log=log)
            if learner is not None:
                learner.check_band(round_no, metrics)
    team.finish()
    if writer is not None and writer.spooled:
        report.spooled, report.spool_root = writer.spooled, str(writer.spool_root.resolve())
        report.load_command = writer.load_command()
    return report


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


def base_offload(knobs, opts: RunOptions, learner, policy, log):
    """`--set policy_offload=host`: the policy's frozen base weights to pinned host memory now
    (train.policy.offload), or None. Only where the engine has weights of its own."""
    from train.policy.offload import BaseOffload, check_offload

    if check_offload(knobs.policy_offload) == "off" or learner is None:
        return None
    offload = BaseOffload(learner.policy.model)
    freed = offload.offload()
    log(f"Policy offload: {freed / 2**30:.1f} GiB of frozen base weights in host memory while the engine generates")
    return offload


def generate_round(round_no: int, trees, ctx, team, backend):
    """`gen`: rank 0 runs the round (its backend deals each call over the ranks, and it executes
    and records the nodes); every other rank generates its shares until rank 0 has the round."""
    from train.generate.ranks import end_generation, serve_generation
    from train.rollout.round import run_round

    if not team.main:
        serve_generation(team, backend)
        return None
    result = run_round(round_no, trees, ctx)
    end_generation(team)
    return result


def round_line(round_no: int, result, where: str, log) -> dict:
    """Log the round's one-line summary; returns its counts (the RunReport's entry)."""
    records = result.all_records()
    counts = {"round": round_no, "nodes": len(records),
              "executed": sum(r["exc_type"] != PROMPT_ERROR_EXC_TYPE for r in records),  # as each task's line counts
              "valid": sum(r["status"] == OK for r in records),
              "drafts": sum(r["mode"] == DRAFT for r in records),
              "best_reward": max((r["reward"] for r in records), default=None), "written_to": where}
    log(f"Round {round_no}: {counts['nodes']} nodes generated, {counts['executed']} executed, "
        f"{counts['valid']} valid, {counts['drafts']} drafts, best reward {counts['best_reward']:.3f} "
        f"(gen {result.gen_seconds:.0f} s, exec {result.exec_seconds:.0f} s) -> {where}")
    return counts


def new_run_id(arm: str, now: datetime | None = None) -> str:
    """`<UTC time to the microsecond>_<6 random hex digits>_<arm>`, e.g.
    `20261201_021530_123456_3f9a0c_hr24k_u6`: sorts by start time, and runs started in the
    same microsecond (a seed sweep launched from a script) still differ. The warehouse claim
    (train.writer) refuses any id already there."""
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%d_%H%M%S_%f}_{secrets.token_hex(3)}_{arm}"


def _quiet(line: str) -> None:
    """The log of ranks other than 0: rank 0 speaks for the run."""
