-- node_tokens: one row per response token of a node record (run_id, round, task, node_id, position).
--
-- The node's response_token_ids and response_logprobs (node_payloads), unrolled so SQL can search
-- tokens across runs: the least likely tokens of a run, a token id's logprobs over rounds. position
-- is 0-based; logprob is NULL where the record stored fewer logprobs than tokens. This is the one
-- view that reads node_payloads: filter by run_id (or node) before scanning all of it.
CREATE OR REPLACE VIEW "node_tokens" AS
SELECT
    n."run_id",
    n."round",
    n."task",
    n."node_id",
    n."source_id",
    n."line_no",
    t."i" - 1 AS "position",
    p."response_token_ids"[t."i"] AS "token_id",
    p."response_logprobs"[t."i"] AS "logprob"
FROM "node_payloads" AS p
JOIN "nodes" AS n USING ("source_id", "line_no"),
LATERAL (SELECT unnest(range(1, len(p."response_token_ids") + 1)) AS "i") AS t;
