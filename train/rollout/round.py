"""One tree-search round over every task: plan expansions, generate, execute, record.

Expansion index by index: every task's expansion `e` is planned on the tree as it stands,
then all their siblings are generated in ONE batched call (all tasks of the round share the
batch), then each task's siblings are executed and graded (in parallel on the executor) and
added to the tree, so expansion `e + 1` can pick a parent made at `e`.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

from train.generate.base import Backend, GenRequest, SamplingConfig
from train.rollout.records import node_records, prompt_error_record, task_round_summary
from train.rollout.rng import generation_seed
from train.rollout.tree import SearchSettings, TaskTree, plan_expansion


@dataclass
class RoundResult:
    round: int
    records: dict = field(default_factory=dict)  # task -> node records, in expansion order
    summaries: dict = field(default_factory=dict)  # task -> summary
    completions: dict = field(default_factory=dict)  # task -> Completions, aligned with records
    gen_seconds: float = 0.0
    exec_seconds: float = 0.0

    def all_records(self) -> list[dict]:
        return [r for records in self.records.values() for r in records]


@dataclass
class RoundContext:
    """What a round needs besides the trees: tasks, policy backend, executor, settings."""

    tasks: dict  # name -> train.env Task
    backend: Backend
    sampling: SamplingConfig
    settings: SearchSettings
    run_seed: int
    run_id: str
    model_name: str
    executor: object = None
    limits: object = None
    progress: object = None  # callable(str) or None
    monitor: object = None  # train.progress.LiveProgress or None (the live display's events)


def run_round(round_no: int, trees: dict[str, TaskTree], ctx: RoundContext) -> RoundResult:
    """Run every expansion of round `round_no`; `trees` grow in place."""
    result = RoundResult(round_no, {t: [] for t in ctx.tasks}, {}, {t: [] for t in ctx.tasks})
    llm_s = {t: 0.0 for t in ctx.tasks}
    exec_s = {t: 0.0 for t in ctx.tasks}
    for index in range(ctx.settings.expansions_per_round):
        expansions = [plan_expansion(trees[t], ctx.tasks[t].description, round_no, index, ctx.settings, ctx.run_seed)
                      for t in ctx.tasks]
        batches, seconds = _generate(expansions, ctx, round_no, index)
        _share_llm_seconds(llm_s, expansions, batches, seconds)
        for expansion, completions in zip(expansions, batches):
            records, took = _execute(expansion, completions, ctx)
            exec_s[expansion.task] += took
            trees[expansion.task].add(records)
            result.records[expansion.task].extend(records)
            result.completions[expansion.task].extend(completions)
        result.gen_seconds += seconds
    result.exec_seconds = sum(exec_s.values())
    result.summaries = {t: _summary(t, round_no, result.records[t], trees[t], ctx, llm_s[t], exec_s[t])
                        for t in ctx.tasks}
    return result


def _generate(expansions, ctx: RoundContext, round_no: int, index: int):
    requests = [GenRequest(e.messages, ctx.settings.siblings) for e in expansions]
    sampling = dataclasses.replace(ctx.sampling, seed=generation_seed(ctx.run_seed, round_no, index))
    start = time.monotonic()
    batches = ctx.backend.generate(requests, sampling)
    seconds = time.monotonic() - start
    if ctx.monitor is not None:
        ctx.monitor.expansion_generated(sum(map(len, batches)),
                                        sum(len(c.response_token_ids) for b in batches for c in b))
    _say(ctx, f"  round {round_no} expansion {index}: generated {sum(map(len, batches))} nodes in {seconds:.1f} s")
    return batches, seconds


def _share_llm_seconds(llm_s: dict, expansions, batches, seconds: float) -> None:
    """Split one batched call's seconds over its tasks by the tokens each one generated."""
    tokens = [sum(len(c.response_token_ids) for c in batch) for batch in batches]
    total = sum(tokens)
    for expansion, n in zip(expansions, tokens):
        llm_s[expansion.task] += seconds * (n / total if total else 1 / len(expansions))


def _execute(expansion, completions, ctx: RoundContext) -> tuple[list[dict], float]:
    """Env records for the siblings (prompt errors skip execution), then full node records."""
    from train.env import evaluate

    start = time.monotonic()
    runnable = [i for i, c in enumerate(completions) if c.error is None]
    evaluated = evaluate(ctx.tasks[expansion.task], [completions[i].answer for i in runnable],
                         ctx.executor, ctx.limits) if runnable else []
    by_index = dict(zip(runnable, evaluated))
    env_records = [by_index.get(i) or prompt_error_record(c) for i, c in enumerate(completions)]
    records = node_records(expansion, completions, env_records)
    took = time.monotonic() - start
    valid = sum(r["status"] == "ok" for r in records)
    if ctx.monitor is not None:
        ctx.monitor.expansion_executed(len(runnable), [r["status"] for r in records])
    _say(ctx, f"  {expansion.task}: {expansion.mode} x{len(records)}, executed {len(runnable)}, "
              f"valid {valid}, best reward {max((r['reward'] for r in records), default=float('nan')):.3f}")
    return records, took


def _summary(task: str, round_no: int, records, tree: TaskTree, ctx: RoundContext, llm_s: float, exec_s: float) -> dict:
    return task_round_summary(
        task, round_no, records, model=ctx.model_name, expansions=ctx.settings.expansions_per_round,
        buffer_nodes=len(tree.nodes), gen_llm_seconds=llm_s, gen_exec_seconds=exec_s,
        rollout_file=f"{ctx.run_id}/round_{round_no}/{task}.jsonl", workspace=f"local:{ctx.run_id}")


def _say(ctx: RoundContext, line: str) -> None:
    if ctx.progress is not None:
        ctx.progress(line)
