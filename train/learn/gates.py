"""The run's gates, read from the warehouse (docs/metrics.md), not from the trainer's memory.

* Health gate (after step 1): every task of the run's first round has >= 1 ok node AND every
  ok node's reward is in [0, 1] -- `run_metrics.health_gate_step1` -- AND the sampler and the
  trainer agree on the round's tokens within the run's limits (check 16,
  warehouse.quality.mismatch). Failing it stops the run (`--no-health-gate` continues).
* Decision rule (printed at `--decision-steps`): per task, valid_reward_mean at round k minus
  that at the first round of the lineage root; "moved" when > 0 -- the `decision_rule` view.
"""
from __future__ import annotations

from dataclasses import dataclass

from warehouse.errors import TerminalError
from warehouse.vocabulary import OK


class HealthGateError(TerminalError):
    """The run failed the step-1 health gate."""


@dataclass(frozen=True)
class GateTask:
    task: str
    ok_nodes: int
    bad_ok_rewards: int
    failures: str = ""  # the other nodes' statuses and exception types, most common first


def health_gate(con, run_id: str) -> tuple[bool | None, list[GateTask]]:
    """(run_metrics.health_gate_step1, the first round's per-task counts from task_round_metrics
    for the message)."""
    row = con.execute('SELECT "health_gate_step1", "first_round" FROM "run_metrics" WHERE "run_id" = ?',
                      [run_id]).fetchone()
    if row is None or row[1] is None:
        return None, []
    tasks = con.execute('SELECT "task", "valid", "valid_rewards_out_of_range" FROM "task_round_metrics" '
                        'WHERE "run_id" = ? AND "round" = ? ORDER BY "task"', [run_id, row[1]]).fetchall()
    failures: dict[str, list[str]] = {}
    for task, status, exc_type, count in con.execute(
            """
            SELECT "task", "status", coalesce("exc_type", ''), count(*) FROM "nodes"
            WHERE "run_id" = ? AND "round" = ? AND "status" IS DISTINCT FROM ?
            GROUP BY ALL ORDER BY 4 DESC, 2, 3
            """, [run_id, row[1], OK]).fetchall():
        failures.setdefault(task, []).append(f"{count} {status}" + (f" {exc_type}" if exc_type else ""))
    return row[0], [GateTask(*t, failures=", ".join(failures.get(t[0], []))) for t in tasks]


def check_health_gate(con, run_id: str) -> str:
    """Raise HealthGateError naming the failing tasks; return a one-line pass message."""
    passed, tasks = health_gate(con, run_id)
    if passed is None:
        raise HealthGateError(f"health gate: run {run_id} has no first round in the warehouse; "
                              "was the round written (see 'warehouse metrics')? --no-health-gate skips it")
    if not passed:
        reasons = [f"{t.task}: {t.ok_nodes} ok nodes" + (f", {t.bad_ok_rewards} ok rewards outside [0, 1]"
                                                          if t.bad_ok_rewards else "")
                   + (f" ({t.failures})" if t.failures and t.ok_nodes == 0 else "")
                   for t in tasks if t.ok_nodes == 0 or t.bad_ok_rewards]
        raise HealthGateError(f"health gate failed after step 1 of run {run_id} ({'; '.join(reasons)}). "
                              "Fix the tasks or the policy, or rerun with --no-health-gate to continue")
    check_mismatch(con, run_id)
    return f"Health gate passed: every task of the first round has an ok node ({len(tasks)} tasks)."


def check_mismatch(con, run_id: str) -> None:
    """Raise HealthGateError when the first round's sampler and trainer logprobs disagree
    beyond the run's limits (check 16), naming the likely causes."""
    from warehouse.quality.mismatch import LIKELY_CAUSES, failures

    first = con.execute('SELECT "first_round" FROM "run_metrics" WHERE "run_id" = ?', [run_id]).fetchone()
    failed = failures(con, run_id, first[0]) if first and first[0] is not None else []
    if failed:
        raise HealthGateError(f"health gate failed after step 1 of run {run_id}: the sampler's and the "
                              f"trainer's logprobs disagree ({'; '.join(failed)}). Likely causes: "
                              f"{LIKELY_CAUSES}. Raise the limits with --set mismatch_max=... or rerun "
                              "with --no-health-gate to continue")


def decision_rule(con, run_id: str, k: int) -> list[tuple]:
    """(task, root_run_id, first_round, delta, moved) per task at round k of the run."""
    return con.execute(
        'SELECT "task", "root_run_id", "first_round", "delta", "moved" FROM "decision_rule" '
        'WHERE "run_id" = ? AND "k" = ? ORDER BY "task"', [run_id, k]).fetchall()


def format_decision(rows: list[tuple], run_id: str, k: int) -> str:
    """The pre-registered reading: how many tasks moved, with each task's delta."""
    if not rows:
        return f"Decision rule at step {k}: run {run_id} has no round {k} in the warehouse."
    moved = sum(1 for r in rows if r[4])
    root, first = rows[0][1], rows[0][2]
    parts = [f"{task} {'n/a' if delta is None else f'{delta:+.3f}'}{' moved' if mv else ''}"
             for task, _, _, delta, mv in rows]
    return (f"Decision rule at step {k}: {moved} of {len(rows)} tasks moved "
            f"(valid_reward_mean vs {root} round {first}): " + "; ".join(parts))


def parse_steps(text: str) -> tuple[int, ...]:
    """'9,16,30' -> (9, 16, 30); a clear error otherwise."""
    try:
        return tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise TerminalError(f"--decision-steps {text!r}: expected comma-separated step numbers, e.g. 9,16,30") from None
