"""`train run`: tree-search GRPO rounds, written straight into the warehouse.

One loop, top to bottom (:func:`rounds`). Per round: `gen` (tree-search rollouts on every task:
expansions of `siblings` completions, executed and graded), then the GRPO step (`old_log_prob`,
`ref`, `adv`, `update_actor` inside :func:`train.learn.step.grpo_step`), `update_weights` (make
the generator see the new weights) and `save_checkpoint`; then the round, its step's timing row
and metrics are committed to the warehouse in one transaction (or spooled together). The loop
calls five modules, each named where it is used; docs/trainer.md says what a round does in each.

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
from dataclasses import dataclass, field

from train.distributed import join_team, leave_team
from train.factories import Pieces, run_life, set_up
from train.learn.learner import record_round, round_samples
from train.rollout.round import run_round
from train.writer import RoundWrite
from warehouse.vocabulary import DRAFT, OK, PROMPT_ERROR_EXC_TYPE


@dataclass
class RunReport:
    run_id: str
    rounds: list = field(default_factory=list)  # one dict of counts per round
    spooled: list = field(default_factory=list)  # rounds not in the warehouse: they are in the spool
    spool_root: str | None = None
    load_command: str | None = None  # what loads the spool into the warehouse


def run(opts, log=print, monitor=None) -> RunReport:
    """Run `opts.rounds` rounds (`opts`: train.settings.RunOptions); every finished round is in
    the warehouse (or spooled).

    `monitor` (train.progress.LiveProgress) draws each round and step live at a terminal.
    Under torchrun every rank calls it (`team`, train.distributed): rank 0 runs the rounds as one
    process does (:func:`rounds`), every other rank follows them (:func:`follow_rank_0`) and
    returns an empty report."""
    team = join_team(opts.device)
    try:
        opts = dataclasses.replace(opts, device=team.device)
        log = log if team.main else _quiet
        with run_life(opts, team, log) as life:  # started, beats, ended (rank 0)
            pieces = set_up(opts, team, life, log, monitor if team.main else None)
            if not team.main:
                return follow_rank_0(pieces, team)
            return rounds(pieces, team, life, log)
    finally:
        if monitor is not None:
            monitor.close()
        leave_team(team)


def rounds(run: Pieces, team, life, log) -> RunReport:
    """The rounds, as one process runs them (rank 0 under torchrun): gen (generate, execute,
    grade), then the GRPO step, then the round's rows in one transaction. With one process every
    `team` call does nothing; with several, `team.alone()` marks rank 0's own work (a failure
    there stops every rank) and `team.share` hands a value to every rank."""
    report = RunReport(run.run_id)
    version = run.version  # the global step of the weights the generator samples from
    for round_no in run.rounds:
        life.round_started()  # a run from here on, however it ends (train.run_state)
        timer = run.timer(round_no)
        with team.alone():
            run.watch.round_started(round_no, run.arm.expansions_per_round, len(run.tasks))
            with timer.phase("gen"):
                result = run_round(round_no, run.trees, run.ctx)  # generate, execute, grade
                team.generation_done()
                run.sleep_engine()
        metrics = step = None
        if run.learner is not None:
            run.watch.step_started(round_no)
            metrics, step = learn(run, team, team.share(round_samples(result)), timer, round_no, log)
            record_round(result, version, run.learner.tokens, step=round_no)
            version = round_no
        else:
            record_round(result, version)
        run.watch.round_finished()
        with team.alone():
            report.rounds.append(record(run, round_no, result, step, metrics, log))
    team.finish()
    return spooled(run, report)


def learn(run: Pieces, team, samples: list, timer, round_no: int, log) -> tuple[dict, dict]:
    """The round's GRPO step, on every rank: (metrics, the step's timing row). The update
    (old_log_prob, ref, adv, update_actor: train.learn.learner), `update_weights` (the
    generator samples from the new weights), then `save_checkpoint` when one is due."""
    run.base_to_device(log)
    metrics = run.learner.step(samples, timer, round_no)
    with timer.phase("update_weights"):
        run.update_weights(round_no, team, log)
    if run.checkpoint_due(round_no):
        with timer.phase("save_checkpoint"):
            run.learner.save(run.opts.checkpoint_root, run.run_id, round_no)
    return metrics, run.step_row(timer, round_no, metrics, log)


def record(run: Pieces, round_no: int, result, step: dict | None, metrics: dict | None, log) -> dict:
    """Rank 0: the round, its step's timing row and metrics in one transaction (or spooled),
    then the gates that read them; returns the round's counts."""
    where = run.writer.write(RoundWrite.of(round_no, result, step, metrics))
    counts = round_line(round_no, result, where, log)
    if run.learner is not None:
        run.after_write(round_no, metrics, where, log)
    return counts


def follow_rank_0(run: Pieces, team) -> RunReport:
    """Every rank but 0, each round: its share of each of rank 0's generation calls, then the
    step with rank 0 (the update is a collective). Rank 0 alone executes, grades and writes."""
    for round_no in run.rounds:
        timer = run.timer(round_no)
        with timer.phase("gen"):
            team.serve_generation(run.backend)
            run.sleep_engine()
        if run.learner is not None:
            learn(run, team, team.share(), timer, round_no, _quiet)
    team.finish()
    return RunReport(run.run_id)


def spooled(run: Pieces, report: RunReport) -> RunReport:
    """`report` with the rounds the warehouse could not take, where they are and how to load them."""
    if run.writer.spooled:
        report.spooled, report.spool_root = run.writer.spooled, str(run.writer.spool_root.resolve())
        report.load_command = run.writer.load_command()
    return report


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


def _quiet(line: str) -> None:
    """The log of ranks other than 0: rank 0 speaks for the run."""
