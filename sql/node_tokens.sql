-- node_tokens: one row per response token of a node record (run_id, round, task, node_id, position).
--
-- The node's response_token_ids and response_logprobs (node_payloads), unrolled so SQL can search
-- tokens across runs: the least likely tokens of a run, a token id's logprobs over rounds. position
-- is 0-based; logprob is NULL where the record stored fewer logprobs than tokens. This view (and
-- logprob_mismatch, for trained nodes) reads node_payloads: filter by run_id (or node) before
-- scanning all of it. One token id across all runs: `warehouse token ID` (warehouse/tokens.py)
-- finds the nodes holding it in node_token_index, then reads only their payloads, through this SELECT.
-- trainer_logprob and ref_logprob are what the GRPO step computed for the token (node_train_tokens:
-- the learner's old_log_prob and the reference's); NULL where the round was not trained (imported
-- roots, --no-learn).
-- The unnests of one SELECT run in step (DuckDB pads the shorter lists with NULL), so no
-- LATERAL join is needed; rows past the last token id (more logprobs than tokens) are dropped.
CREATE OR REPLACE VIEW "node_tokens" AS
SELECT "run_id", "round", "task", "node_id", "source_id", "line_no", "position", "token_id", "logprob",
       "trainer_logprob", "ref_logprob"
FROM (
    SELECT
        n."run_id",
        n."round",
        n."task",
        n."node_id",
        n."source_id",
        n."line_no",
        unnest(range(len(p."response_token_ids"))) AS "position",
        unnest(p."response_token_ids") AS "token_id",
        unnest(p."response_logprobs") AS "logprob",
        unnest(coalesce(tt."trainer_logprobs", [])) AS "trainer_logprob",
        unnest(coalesce(tt."ref_logprobs", [])) AS "ref_logprob"
    FROM "node_payloads" AS p
    JOIN "nodes" AS n USING ("source_id", "line_no")
    LEFT JOIN "node_train_tokens" AS tt USING ("source_id", "line_no")
) AS t
WHERE "position" IS NOT NULL;
