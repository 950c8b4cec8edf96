"""Check 16: the sampler and the trainer agree about the tokens a round trained on.

The figures are those the `logprob_mismatch` view defines (docs/metrics.md), read from the
per-node sums `node_train_tokens` keeps. A run's limits are its `overrides` (`train run --set
mismatch_max=1.2 --set mismatch_share_gt1_max=0.05`, recorded on the run row), else its arm's
(`warehouse.arms.Arm.mismatch_max`, the `arms` table), else these defaults:

* `mismatch_max` 1.1: the mean multiplicative probability error, exp(|trainer - sampler|) over
  the compared tokens, at most 1.1 -- the threshold NVIDIA NeMo RL's functional tests hold
  `train/token_mult_prob_error` to for most of the models they cover.
* `mismatch_share_gt1_max` 0.01: at most 1% of the compared tokens with |trainer - sampler| > 1
  (a token 2.7x more or less likely to one than to the other); our own default, which catches
  a few badly wrong tokens that a mean over many agreeing tokens would hide.

A task-round with no compared token (no sampler logprobs recorded) passes: there is nothing
to judge. The step-1 health gate (train.learn.gates) applies the same limits to the run's
first round.
"""
from __future__ import annotations

MISMATCH_MAX = 1.1
SHARE_GT1_MAX = 0.01
#: What makes a trainer and its sampler disagree, named when the gate fails.
LIKELY_CAUSES = ("the sampler's dtype or kernels differ from the learner's (bf16/fp16 engine, "
                 "other attention or sampling kernels), the engine serves other weights than the "
                 "learner's (a missed or failed update_weights), or a stale LoRA adapter is served")

# The figures of logprob_mismatch per task-round, as the mismatch_sums view adds up the per-node
# sums node_train_tokens keeps: the gate never reads the token arrays (warehouse.quality's rule).
MISMATCH_SQL = """
WITH limits AS (  -- the run's --set, else its arm's, else the defaults
    SELECT m.*,
           coalesce(TRY_CAST(json_extract_string(r."overrides", '$.mismatch_max') AS DOUBLE), a."mismatch_max", ?)
               AS "limit_mult",
           coalesce(TRY_CAST(json_extract_string(r."overrides", '$.mismatch_share_gt1_max') AS DOUBLE),
                    a."mismatch_share_gt1_max", ?) AS "limit_share"
    FROM "mismatch_sums" AS m
    LEFT JOIN "runs" AS r ON r."run_id" = m."run_id"
    LEFT JOIN "arms" AS a ON a."name" = r."arm"
)
SELECT "run_id", "round", "task", CAST(NULL AS VARCHAR) AS "node_id",
       "compared_tokens", "mult_prob_error", "share_abs_delta_gt_1",
       "limit_mult" AS "mismatch_max", "limit_share" AS "share_gt1_max",
       coalesce("mult_prob_error" <= "limit_mult", TRUE) AS "mult_within",
       coalesce("share_abs_delta_gt_1" <= "limit_share", TRUE) AS "share_within"
FROM limits
WHERE (? IS NULL OR "run_id" = ?) AND (? IS NULL OR "round" = ?)
ORDER BY "run_id", "round", "task"
"""


def params(run: str | None = None, round: int | None = None) -> list:
    return [MISMATCH_MAX, SHARE_GT1_MAX, run, run, round, round]


def failures(con, run: str, round: int) -> list[str]:
    """One phrase per task of the run's round outside its limits (empty when all within)."""
    rows = con.execute(MISMATCH_SQL, params(run, round)).fetchall()
    out = []
    for _, _, task, _, tokens, mult, share, mult_max, share_max, mult_ok, share_ok in rows:
        if not (mult_ok and share_ok):
            out.append(f"{task}: mult_prob_error {mult:.3f} (limit {mult_max:g}), "
                       f"{share:.1%} of {tokens} tokens with |delta| > 1 (limit {share_max:.1%})")
    return out
