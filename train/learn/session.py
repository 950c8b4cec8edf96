"""What the `train run` loop does once a round, its step and the step's metrics are in the
warehouse (one transaction, :func:`train.writer.commit_round`): the gates that read the
warehouse (the health gate after the run's first step, the decision rule at the
`--decision-steps`). The step itself is :func:`train.learn.step.grpo_step`; checkpoints and
resume are :mod:`train.learn.checkpoint`.
"""
from __future__ import annotations

from train.learn.gates import check_health_gate, decision_rule, format_decision


def after_commit(db_url: str, run_id: str, step: int, health_gate: bool, decision_steps=(),
                 log=print) -> None:
    """The health gate when asked (the run's first step: raises HealthGateError on failure);
    the decision rule's reading when `step` is a decision step."""
    from warehouse.db import connect

    if health_gate:
        with connect(db_url, read_only=True) as con:
            log(check_health_gate(con, run_id))
    if step in decision_steps:
        with connect(db_url, read_only=True) as con:
            log(format_decision(decision_rule(con, run_id, step), run_id, step))
