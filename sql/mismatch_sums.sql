-- mismatch_sums: one row per run, round and task whose nodes were trained (node_train_tokens).
--
-- logprob_mismatch's figures (all but the p99) from the per-node sums that ingest derives into
-- node_train_tokens when a node lands, never from the token arrays: what round_metrics (per
-- round, adding up the sums) and check 16 with the step-1 health gate (per task-round) read.
-- The sums are kept beside the ratios so a coarser grain can weight by compared tokens.
CREATE OR REPLACE VIEW "mismatch_sums" AS
SELECT
    n."run_id",
    n."round",
    n."task",
    sum(tt."compared_tokens") AS "compared_tokens",        -- tokens with both logprobs
    sum(tt."mult_prob_error_sum") AS "mult_prob_error_sum",  -- sum of exp(|trainer - sampler|)
    max(tt."mult_prob_error_max") AS "mult_prob_error_max",
    sum(tt."abs_delta_gt_1") AS "abs_delta_gt_1",          -- compared tokens with |delta| > 1
    sum(tt."kl_to_ref_sum") AS "kl_to_ref_sum",            -- the loss's k3 KL, over trained tokens
    sum(n."n_response_tokens") AS "trained_tokens",        -- the trained nodes' response tokens
    sum(tt."mult_prob_error_sum") / NULLIF(sum(tt."compared_tokens"), 0) AS "mult_prob_error",
    sum(tt."abs_delta_gt_1") / NULLIF(sum(tt."compared_tokens"), 0) AS "share_abs_delta_gt_1"
FROM "node_train_tokens" AS tt
JOIN "nodes" AS n USING ("source_id", "line_no")
GROUP BY n."run_id", n."round", n."task";
