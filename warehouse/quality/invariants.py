"""The nine invariant checks, numbered as docs/metrics.md numbers them, and the reward-model
checks 10-15.

The numbers are the `check_no` of the `invariant_violations` view and the `check_no` in
each expectation's `meta`, so a failed expectation, a view row and the docs' line agree. The
statuses, modes, sentinel rewards and idle exc types the checks test are
:mod:`warehouse.vocabulary`'s.
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
    # Reward-model runs (data root 004; docs/reward_model.md), in the `rm_violations` view.
    10: "reward-model scores (evaluations and sections) in [0, 100]",
    11: "reward-model evaluations: n > 0 and the standard error consistent with n "
        "(0.5x-2x the binomial 100*sqrt(p(1-p)/n))",
    12: "reward-model evaluations official exactly when a receipt matches the summary; "
        "every final (formal, full-split) score official",
    13: "at most three retained artifacts per reward-model run",
    14: "reward-model progress strictly increasing within a job (artifacts, steps)",
    15: "reward-model proxy rows a subset of the full split (proxy n <= full n)",
    # Training runs: sampler vs trainer (logprob_mismatch; warehouse.quality.mismatch).
    16: "sampler and trainer agree on the trained tokens: mult_prob_error <= the run's mismatch_max "
        "(default 1.1, NeMo RL's) and |delta| > 1 on <= mismatch_share_gt1_max of them (default 1%)",
}


#: Checks whose offending rows are computed by the `invariant_violations` view (cross-row);
#: the others are evaluated row by row by native expectations on the nodes frame.
CROSS_ROW_CHECKS = (3, 7, 8)
#: Reward-model checks read from the `rm_violations` view; 10-12 are also native expectations.
RM_CROSS_ROW_CHECKS = (13, 14, 15)
SE_RATIO_BOUNDS = (0.5, 2.0)  # check 11: SE / binomial SE (kept equal to sql/rm_violations.sql)
