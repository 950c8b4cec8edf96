"""What the `train run` loop does once a round and its step are in the warehouse: the step's
`step_metrics` row, then the gates that read the warehouse (the health gate after the run's
first step, the decision rule at the `--decision-steps`). The step itself is
:func:`train.learn.step.grpo_step`; checkpoints and resume are :mod:`train.learn.checkpoint`.
"""
from __future__ import annotations

from train.learn.gates import check_health_gate, decision_rule, format_decision
from train.learn.store import write_step_metrics


def after_commit(db_url: str, run_id: str, step: int, metrics: dict, health_gate: bool,
                 decision_steps=(), log=print) -> None:
    """The step's `step_metrics` row; the health gate when asked (the run's first step: raises
    HealthGateError on failure); the decision rule's reading when `step` is a decision step."""
    from warehouse.db import connect, transaction

    with connect(db_url) as con:  # one transaction (delete + insert), redone if DuckLake says so
        transaction(con, lambda: write_step_metrics(con, run_id, step, metrics))
    if health_gate:
        with connect(db_url, read_only=True) as con:
            log(check_health_gate(con, run_id))
    if step in decision_steps:
        with connect(db_url, read_only=True) as con:
            log(format_decision(decision_rule(con, run_id, step), run_id, step))
