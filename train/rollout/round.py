"""One tree-search round over every task: plan expansions, generate, execute, record.

Expansion index by index: every task's expansion `e` is planned on the tree as it stands,
then all their siblings are generated in ONE batched call (all tasks of the round share the
batch), then each task's siblings are executed and graded (in parallel on the executor) and
added to the tree, so expansion `e + 1` can pick a parent made at `e`.

With `overlap_exec` (and a backend that declares `streaming`, handing out each request as it
ends: the hf backend's paged path), a task's sibling group starts executing on a thread as
soon as its last sibling has ended, while the call's other groups still generate: a round
waits for its longest sibling, and the groups that end early use that wait. The records are
the same either way (each group's execution depends on its own completions only); they are
added to the trees in task order after the call. The seconds of execution that ran during
generation are reported on the expansion's line and in `RoundResult.exec_overlap_seconds`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from train.generate.base import Backend, GenRequest, SamplingConfig
from train.rollout.records import node_records, prompt_error_record, task_round_summary
from train.rollout.rng import generation_seed
from train.rollout.tree import SearchSettings, TaskTree, plan_expansion
from warehouse.vocabulary import OK, PROMPT_ERROR_EXC_TYPE


@dataclass
class RoundResult:
    round: int
    records: dict = field(default_factory=dict)  # task -> node records, in expansion order
    summaries: dict = field(default_factory=dict)  # task -> summary
    completions: dict = field(default_factory=dict)  # task -> Completions, aligned with records
    gen_seconds: float = 0.0
    exec_seconds: float = 0.0
    exec_overlap_seconds: float = 0.0  # execution that ran while the round was still generating

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
    overlap_exec: bool = False  # execute a finished sibling group while the others generate


def run_round(round_no: int, trees: dict[str, TaskTree], ctx: RoundContext) -> RoundResult:
    """Run every expansion of round `round_no`; `trees` grow in place."""
    result = RoundResult(round_no, {t: [] for t in ctx.tasks}, {}, {t: [] for t in ctx.tasks})
    llm_s = {t: 0.0 for t in ctx.tasks}
    exec_s = {t: 0.0 for t in ctx.tasks}
    overlap = ctx.overlap_exec and ctx.backend.capabilities.streaming
    with ThreadPoolExecutor(max_workers=len(ctx.tasks) or 1) if overlap else contextlib.nullcontext() as pool:
        for index in range(ctx.settings.expansions_per_round):
            expansions = [plan_expansion(trees[t], ctx.tasks[t].description, round_no, index, ctx.settings,
                                         ctx.run_seed) for t in ctx.tasks]
            batches, seconds, early = _generate(expansions, ctx, round_no, index, pool)
            _share_llm_seconds(llm_s, expansions, batches, seconds)
            for k, (expansion, completions) in enumerate(zip(expansions, batches)):
                records, took = early[k].result() if k in early else _execute(expansion, completions, ctx)
                _report(expansion, records, ctx)
                exec_s[expansion.task] += took
                trees[expansion.task].add(records)
                result.records[expansion.task].extend(records)
                result.completions[expansion.task].extend(completions)
            result.gen_seconds += seconds
            result.exec_overlap_seconds += sum(f.overlap for f in early.values())
    result.exec_seconds = sum(exec_s.values())
    result.summaries = {t: _summary(t, round_no, result.records[t], trees[t], ctx, llm_s[t], exec_s[t])
                        for t in ctx.tasks}
    return result


class _Early:
    """A sibling group executing on a thread since its last sibling ended mid-call."""

    def __init__(self, pool, expansion, completions, ctx: RoundContext):
        self.started = time.monotonic()
        self.overlap = 0.0  # seconds of it before the call returned (set by `_generate`)
        self.future = pool.submit(_execute, expansion, completions, ctx)

    def result(self):
        return self.future.result()


def _generate(expansions, ctx: RoundContext, round_no: int, index: int, pool=None):
    """(completions per expansion, seconds, {expansion index: _Early}); with `pool`, a group
    whose siblings have all ended starts executing there while the call goes on."""
    requests = [GenRequest(e.messages, ctx.settings.siblings) for e in expansions]
    sampling = dataclasses.replace(ctx.sampling, seed=generation_seed(ctx.run_seed, round_no, index))
    early: dict[int, _Early] = {}
    start = time.monotonic()
    if pool is None:
        batches = ctx.backend.generate(requests, sampling)
    else:
        def on_request(k: int, completions) -> None:
            early[k] = _Early(pool, expansions[k], completions, ctx)

        try:
            batches = ctx.backend.generate(requests, sampling, on_request=on_request)
        except BaseException:
            for job in early.values():  # nothing of a failed call is kept; let its nodes finish first
                job.future.exception()
            raise
    end = time.monotonic()
    seconds = end - start
    for job in early.values():
        job.overlap = end - job.started
    if ctx.monitor is not None:
        ctx.monitor.expansion_generated(sum(map(len, batches)),
                                        sum(len(c.response_token_ids) for b in batches for c in b))
    during = (f" ({len(early)} of {len(expansions)} groups started executing before it ended, "
              f"{sum(job.overlap for job in early.values()):.1f} s of execution overlapped)") if early else ""
    _say(ctx, f"  round {round_no} expansion {index}: generated {sum(map(len, batches))} nodes in "
              f"{seconds:.1f} s{during}")
    return batches, seconds, early


def _share_llm_seconds(llm_s: dict, expansions, batches, seconds: float) -> None:
    """Split one batched call's seconds over its tasks by the tokens each one generated."""
    tokens = [sum(len(c.response_token_ids) for c in batch) for batch in batches]
    total = sum(tokens)
    for expansion, n in zip(expansions, tokens):
        llm_s[expansion.task] += seconds * (n / total if total else 1 / len(expansions))


def _execute(expansion, completions, ctx: RoundContext) -> tuple[list[dict], float]:
    """Env records for the siblings (prompt errors skip execution), then full node records.
    May run on a thread (`overlap_exec`): it reports nothing itself (`_report` does)."""
    from train.env import evaluate

    start = time.monotonic()
    runnable = [i for i, c in enumerate(completions) if c.error is None]
    evaluated = evaluate(ctx.tasks[expansion.task], [completions[i].answer for i in runnable],
                         ctx.executor, ctx.limits) if runnable else []
    by_index = dict(zip(runnable, evaluated))
    env_records = [by_index.get(i) or prompt_error_record(c) for i, c in enumerate(completions)]
    records = node_records(expansion, completions, env_records)
    return records, time.monotonic() - start


def _report(expansion, records: list[dict], ctx: RoundContext) -> None:
    valid = sum(r["status"] == OK for r in records)
    executed = sum(r["exc_type"] != PROMPT_ERROR_EXC_TYPE for r in records)
    if ctx.monitor is not None:
        ctx.monitor.expansion_executed(executed, [r["status"] for r in records])
    _say(ctx, f"  {expansion.task}: {expansion.mode} x{len(records)}, executed {executed}, "
              f"valid {valid}, best reward {max((r['reward'] for r in records), default=float('nan')):.3f}")


def _summary(task: str, round_no: int, records, tree: TaskTree, ctx: RoundContext, llm_s: float, exec_s: float) -> dict:
    return task_round_summary(
        task, round_no, records, model=ctx.model_name, expansions=ctx.settings.expansions_per_round,
        buffer_nodes=len(tree.nodes), gen_llm_seconds=llm_s, gen_exec_seconds=exec_s,
        rollout_file=f"{ctx.run_id}/round_{round_no}/{task}.jsonl", workspace=f"local:{ctx.run_id}")


def _say(ctx: RoundContext, line: str) -> None:
    if ctx.progress is not None:
        ctx.progress(line)
