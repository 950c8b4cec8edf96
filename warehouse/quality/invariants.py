"""METRICS.md's nine invariant checks, numbered as there.

The numbers are the `check_no` of the `invariant_violations` view and the `check_no` in
each expectation's `meta`, so a failed expectation, a view row and the spec line agree.
"""
from __future__ import annotations

INVARIANTS: dict[int, str] = {
    1: "every ok node's reward in [0, 1]; every other node's reward in {-0.5, -0.2, -1.0}, "
       "with -0.2 exactly when exc_type is CpuIdleError or GpuIdleError",
    2: "status and mode in their known sets; mode 'draft' exactly when parent_id is null",
    3: "summary.valid = recounted valid; summary.nodes = recounted nodes; "
       "summary.best_test_metric = test_metric of summary.best_node_id",
    4: "len(response_token_ids) = len(response_logprobs) <= the arm's response cap",
    5: "status no_code implies empty code",
    6: "source 'grade' exactly when test_metric is not null; oriented = +/- test_metric",
    7: "timing: phase_sum_gap <= max(1 s, 1% of total_s); steps strictly increasing",
    8: "every parent_id names a node of the same run lineage",
    9: "node ids unique within a run",
}

STATUSES = ("ok", "crashed", "timeout", "no_code", "no_submission", "invalid_submission")
MODES = ("draft", "improve", "debug")
SENTINEL_REWARDS = (-0.5, -0.2, -1.0)
IDLE_REWARD = -0.2
IDLE_EXC_TYPES = ("CpuIdleError", "GpuIdleError")

#: Checks whose offending rows are computed by the `invariant_violations` view (cross-row);
#: the others are evaluated row by row by native expectations on the nodes frame.
CROSS_ROW_CHECKS = (3, 7, 8)
