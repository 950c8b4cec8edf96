"""From completions to node records: extract, execute (in parallel), grade, reward.

The record is a plain dict with the node-record keys (docs/data-roots.md) that the environment knows;
the rollout adds id, parent_id, mode, tokens and the rest.

Status choices (the warehouse accepts only the six known statuses; every name and sentinel is
:mod:`warehouse.vocabulary`'s, and a node the sandbox stopped is judged by its `VERDICTS` table):
- idle kill: ``crashed`` with exc_type ``CpuIdleError``, or ``GpuIdleError`` for a node that
  left its GPUs idle (reward -0.2). Not ``timeout``: the
  node did not run out of time, it stopped working, and the reward table tells it apart.
- the sandbox itself failed: ``crashed`` with exc_type ``InfrastructureError`` (reward -1.0).
- a time limit (on the node's own clock) or CPU-time limit: ``timeout`` with exc_type
  ``TimeoutError`` (RLIMIT_CPU kills with SIGXCPU, which is reported as a timeout too).
- over the node's memory limit (its tree and tmpfs) or disk quota: ``crashed`` with exc_type
  ``MemoryLimitError`` or ``DiskLimitError`` (reward -0.5).
- any failure while staging, running, retrieving, grading or cleaning up one node: that
  node's ``crashed`` / ``InfrastructureError`` record (-1.0), with the failure in its
  ``term_tail``; its siblings' records stand.
"""
from __future__ import annotations

import dataclasses
import logging

from train.env.executors import Executor, LocalExecutor
from train.env.extract import Extraction, extract
from train.env.grading import Grade, grade_isolated
from train.env.reward import reward_for
from train.env.sandbox import ExecResult, Limits, SandboxJob, require_sandbox
from train.env.tasks import Task
from warehouse import vocabulary as vocab

log = logging.getLogger(__name__)


def evaluate(task: Task, completions: list[str], executor: Executor | None = None,
             limits: Limits | None = None) -> list[dict]:
    """One node record per completion (siblings run in parallel on ``executor``)."""
    extractions = [extract(c) for c in completions]
    return evaluate_extractions(task, extractions, executor, limits)


def evaluate_code(task: Task, code: str, executor: Executor | None = None,
                  limits: Limits | None = None) -> dict:
    """The node record of one bare script (no fence needed): what ``train env check`` runs."""
    from train.env.extract import parse_declaration

    extraction = Extraction(code=code, plan="", has_code=True, **parse_declaration(code))
    return evaluate_extractions(task, [extraction], executor, limits)[0]


def check_solution(task_name: str, text: str, tasks_root=None, timeout_s: float = 600.0,
                   gpus: list[int] | tuple[int, ...] = (), unsafe_no_sandbox: bool = False) -> dict:
    """``train env check``: a script or a fenced completion through the whole path."""
    from train.env.tasks import load_task

    limits = Limits(timeout_s=timeout_s, allow_list=not unsafe_no_sandbox)
    require_sandbox(limits)
    task = load_task(task_name, tasks_root)
    executor = LocalExecutor(gpus=gpus)
    if "```" in text:
        return evaluate(task, [text], executor=executor, limits=limits)[0]
    return evaluate_code(task, text, executor=executor, limits=limits)


def evaluate_extractions(task: Task, extractions: list[Extraction], executor: Executor | None,
                         limits: Limits | None) -> list[dict]:
    executor = executor or LocalExecutor()
    limits = limits or Limits()
    require_sandbox(limits)
    runnable = [i for i, e in enumerate(extractions) if e.has_code]
    jobs = [SandboxJob(code=extractions[i].code, public_dir=str(task.public_dir),
                       hidden_dirs=_hidden_dirs(task), limits=limits,
                       gpu_request=_declared_gpus(extractions[i])) for i in runnable]
    results = dict(zip(runnable, executor.run(jobs)))
    return [_record_or_infra(task, e, results.get(i), limits) for i, e in enumerate(extractions)]


def _record_or_infra(task: Task, extraction: Extraction, result: ExecResult | None, limits: Limits) -> dict:
    """The node's record; a failure to make it (grading it, say) is the node's own
    infrastructure record, never its siblings'."""
    try:
        return node_record(task, extraction, result, limits)
    except Exception as exc:  # noqa: BLE001 - one node's failure stays one node's
        log.warning("node record failed: %s: %s", type(exc).__name__, exc)
        tail = (f"{result.term_tail if result else ''}\nsandbox: the node's record failed: "
                f"{type(exc).__name__}: {str(exc)[:500]}")[-limits.term_tail_chars:]
        failed = dataclasses.replace(result or ExecResult(outcome=vocab.INFRA), outcome=vocab.INFRA,
                                     exc_type=vocab.VERDICTS[vocab.INFRA].exc_type, term_tail=tail, submission=None)
        return node_record(task, extraction, failed, limits)


def _declared_gpus(extraction: Extraction) -> int:
    """GPUs the script's [tool.resources] asks for (0 without a valid declaration)."""
    gpu = (extraction.resources or {}).get("gpu")
    return max(0, int(gpu)) if isinstance(gpu, (int, float)) else 0


def _hidden_dirs(task: Task) -> tuple[str, ...]:
    # The whole tasks root (every task's answers), and the task's own private dir in case the
    # root cannot be hidden (e.g. it contains the workspace).
    return tuple(dict.fromkeys([str(task.root.parent), str(task.root), str(task.private_dir)]))


def node_record(task: Task, extraction: Extraction, result: ExecResult | None,
                limits: Limits | None = None) -> dict:
    """The record of one node; ``result`` is None when there was no code to run. Beside the
    published roots' fields it keeps how the sandbox ended the node (``outcome``: memory_limit,
    disk_limit, timeout, ...), the workspace's disk peak and the limits it ran under (the
    warehouse keeps them in ``nodes.extra``)."""
    status, exc_type, grade = _judge(task, result)
    return {
        "code": extraction.code,
        "plan": extraction.plan,
        "status": status,
        "exc_type": exc_type,
        "is_buggy": status != vocab.OK,
        "reward": reward_for(status, exc_type, grade.humanrank),
        "test_metric": grade.test_metric,
        "oriented": grade.oriented,
        "source": "grade" if grade.test_metric is not None else None,
        "grade_error": grade.grade_error,
        "medal": grade.medal,
        "humanrank": grade.humanrank,
        **_exec_fields(result),
        "limits": _limit_fields(limits) if result is not None else None,
        "resources": extraction.resources,
        "decl_malformed": extraction.decl_malformed,
        "decl_miss_reason": extraction.decl_miss_reason,
        "decl_deps_ignored": extraction.decl_deps_ignored,
        "attempt": 1,
    }


def _judge(task: Task, result: ExecResult | None) -> tuple[str, str | None, Grade]:
    """(status, exc_type, grade) from how the node ran and what it submitted."""
    none = Grade(status="none")
    if result is None:
        return vocab.NO_CODE, None, none
    # RLIMIT_CPU kills with SIGXCPU: the CPU-time limit, a timeout like the wall-clock one
    outcome = vocab.TIME_LIMIT if result.exc_type == "SIGXCPU" else result.outcome
    stopped = vocab.VERDICTS.get(outcome)  # the sandbox ended it: the table the sandbox names it by
    if stopped is not None:
        return stopped.status, stopped.exc_type, none
    if result.returncode != 0:
        return vocab.CRASHED, result.exc_type, none
    grade = grade_isolated(task, result.submission)
    return grade.status, None, grade


def _exec_fields(result: ExecResult | None) -> dict:
    r = result or ExecResult(outcome=vocab.NOT_RUN)
    return {
        "exec_time": r.exec_time, "exec_timings": r.exec_timings, "term_tail": r.term_tail,
        "returncode": r.returncode, "where": r.where or None,
        "cpu_util_mean": r.cpu_util_mean, "cpu_util_peak": r.cpu_util_peak,
        "mem_peak_gi": r.mem_peak_gi, "gpu_util": r.gpu_util, "gpu_util_peak": r.gpu_util_peak,
        "gpu_mem_used_gi": r.gpu_mem_used_gi, "gpu_name": r.gpu_name, "kube_node": None,
        "outcome": r.outcome, "disk_peak_gi": r.disk_peak_gi,
    }


def _limit_fields(limits: Limits | None) -> dict | None:
    """The limits that judged the node: its time on its own clock, its tree's memory with its
    tmpfs, its workspace's disk, its CPUs."""
    if limits is None:
        return None
    return {"timeout_s": limits.timeout_s, "mem_gi": limits.mem_gi, "disk_gi": limits.disk_gi,
            "cpus": limits.cpus}
