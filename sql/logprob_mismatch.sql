-- logprob_mismatch: one row per run, round and task whose nodes were trained (node_train_tokens).
--
-- How far the sampler (the engine that generated the tokens) and the trainer disagree about the
-- tokens the round trained on. Compared tokens: a trained node's response tokens that carry both
-- the sampler's logprob (node_payloads.response_logprobs) and the learner's old_log_prob
-- (node_train_tokens.trainer_logprobs, before the step's update); delta = trainer - sampler.
--
-- mult_prob_error is NVIDIA NeMo RL's "token_mult_prob_error": the mean over compared tokens of
-- exp(|logprob_train - logprob_inference|), 1.0 when the two agree exactly (NeMo RL,
-- nemo_rl/algorithms/loss_functions.py, and the thresholds of its per-model functional tests;
-- docs/metrics.md). Its max and 99th percentile (continuous) are over the same tokens.
-- kl_to_ref_mean is the mean over trained tokens of the loss's k3 estimate of KL(policy || ref)
-- at the learner's old_log_prob (train/learn/loss.py: exp(ref - lp) - (ref - lp) - 1, the
-- difference clamped to +-20), whether or not the sampler's logprob was recorded.
-- It unrolls the arrays as node_tokens does, but starting from the trained nodes: only their
-- payloads are read, and a warehouse with no trained round (imported roots) reads none.
CREATE OR REPLACE VIEW "logprob_mismatch" AS
WITH tokens AS (
    SELECT
        n."run_id",
        n."round",
        n."task",
        n."source_id",
        n."line_no",
        unnest(range(len(p."response_token_ids"))) AS "position",
        unnest(p."response_logprobs") AS "logprob",
        unnest(tt."trainer_logprobs") AS "trainer_logprob",
        unnest(tt."ref_logprobs") AS "ref_logprob"
    FROM "node_train_tokens" AS tt
    JOIN "nodes" AS n USING ("source_id", "line_no")
    JOIN "node_payloads" AS p USING ("source_id", "line_no")
)
SELECT
    "run_id",
    "round",
    "task",
    count(DISTINCT ("source_id", "line_no")) AS "trained_nodes",
    count(*) AS "trained_tokens",                                 -- tokens with a trainer_logprob
    count("logprob") AS "compared_tokens",                        -- of those, with a sampler logprob
    avg(exp(abs("trainer_logprob" - "logprob"))) AS "mult_prob_error",
    max(exp(abs("trainer_logprob" - "logprob"))) AS "mult_prob_error_max",
    quantile_cont(exp(abs("trainer_logprob" - "logprob")), 0.99) AS "mult_prob_error_p99",
    avg(CAST(abs("trainer_logprob" - "logprob") > 1 AS DOUBLE))
        AS "share_abs_delta_gt_1",                                -- of compared tokens, |delta| > 1
    avg(exp(least(greatest("ref_logprob" - "trainer_logprob", -20), 20))
        - least(greatest("ref_logprob" - "trainer_logprob", -20), 20) - 1) AS "kl_to_ref_mean"
FROM tokens
WHERE "position" IS NOT NULL AND "trainer_logprob" IS NOT NULL
GROUP BY "run_id", "round", "task";
