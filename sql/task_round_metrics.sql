-- task_round_metrics: one row per task-round (run_id, round, task).
--
-- The per-task-round report metrics of docs/metrics.md, computed from the node records alone
-- (plus the summary's presence and the run's arm for the response cap). Every rate has the
-- node count as its denominator and is NULL, never 0, when the task-round holds no records.
--
-- A task-round exists when ingest saw its node file or its summary (table task_rounds) or
-- when node records name it. A task-round with 0 records (empty stub jsonl, a summary without
-- records, a task the kill cut before its first node) still gets a row: the counts (nodes,
-- valid, groups, reward_spread, clipped_at_cap when the cap is known) are 0 and every rate
-- and mean is NULL.
CREATE OR REPLACE VIEW "task_round_metrics" AS
WITH
node_rows AS (
    -- the columns read below, read from nodes once (each read of a table is a scan, and on
    -- DuckLake each scan costs its catalog queries); a filter on run_id reaches this scan
    SELECT "run_id", "round", "task", "status", "mode", "reward", "test_metric", "oriented",
           "node_id", "line_no", "n_response_tokens", "sibling_group"
    FROM "nodes"
),
keys AS (
    SELECT "run_id", "round", "task" FROM "task_rounds"
    UNION
    SELECT DISTINCT "run_id", "round", "task" FROM node_rows
),
caps AS (
    -- The run's response cap: its arm's, or its own override (view run_caps); else NULL.
    SELECT "run_id", "response_cap" FROM "run_caps"
),
node_stats AS (
    SELECT
        n."run_id", n."round", n."task",
        count(*) AS "nodes",
        count(*) FILTER (WHERE n."status" = 'ok') AS "valid",
        count(*) FILTER (WHERE n."status" = 'ok' AND NOT coalesce(n."reward" BETWEEN 0 AND 1, FALSE))
            AS "valid_rewards_out_of_range",
        count(*) FILTER (WHERE n."status" = 'crashed') AS "crashed",
        count(*) FILTER (WHERE n."status" = 'timeout') AS "timeout",
        count(*) FILTER (WHERE n."status" = 'no_code') AS "no_code",
        count(*) FILTER (WHERE n."status" = 'no_submission') AS "no_submission",
        count(*) FILTER (WHERE n."status" = 'invalid_submission') AS "invalid_submission",
        count(*) FILTER (WHERE n."mode" = 'draft') AS "drafts",
        count(*) FILTER (WHERE n."mode" = 'improve') AS "improves",
        count(*) FILTER (WHERE n."mode" = 'debug') AS "debugs",
        avg(n."reward") AS "reward_node_mean",
        avg(n."reward") FILTER (WHERE n."status" = 'ok') AS "valid_reward_mean",
        avg(n."reward") FILTER (WHERE n."status" = 'ok' AND n."mode" = 'draft') AS "draft_reward_mean",
        max(n."reward") AS "reward_best",
        -- the ok node with the highest oriented score; ties go to the smallest node id
        first(n."test_metric" ORDER BY n."oriented" DESC, n."node_id" ASC, n."line_no" ASC)
            FILTER (WHERE n."status" = 'ok' AND n."oriented" IS NOT NULL) AS "best_test_metric_recount",
        count(DISTINCT n."reward") AS "distinct_rewards",
        avg(n."n_response_tokens") AS "mean_response_tokens",
        count(*) FILTER (WHERE n."n_response_tokens" >= c."response_cap") AS "at_or_over_cap",
        count(*) FILTER (WHERE n."n_response_tokens" = c."response_cap") AS "at_cap"
    FROM node_rows AS n
    LEFT JOIN caps AS c ON c."run_id" = n."run_id"
    GROUP BY n."run_id", n."round", n."task"
),
group_stats AS (
    SELECT "run_id", "round", "task",
           count(*) AS "groups",
           count(*) FILTER (WHERE "distinct_rewards" > 1) AS "groups_with_signal"
    FROM (
        SELECT "run_id", "round", "task", "sibling_group",
               count(DISTINCT "reward") AS "distinct_rewards"
        FROM node_rows
        WHERE "sibling_group" IS NOT NULL
        GROUP BY "run_id", "round", "task", "sibling_group"
    ) AS per_group
    GROUP BY "run_id", "round", "task"
)
SELECT
    k."run_id",
    k."round",
    k."task",
    coalesce(s."nodes", 0) AS "nodes",
    coalesce(s."valid", 0) AS "valid",
    coalesce(s."valid_rewards_out_of_range", 0) AS "valid_rewards_out_of_range",  -- ok nodes, reward not in [0, 1]
    s."valid" / NULLIF(s."nodes", 0) AS "valid_rate",
    s."crashed" / NULLIF(s."nodes", 0) AS "crash_rate",
    s."timeout" / NULLIF(s."nodes", 0) AS "timeout_rate",
    s."no_code" / NULLIF(s."nodes", 0) AS "no_code_rate",
    s."no_submission" / NULLIF(s."nodes", 0) AS "no_submission_rate",
    s."invalid_submission" / NULLIF(s."nodes", 0) AS "invalid_submission_rate",
    s."drafts" / NULLIF(s."nodes", 0) AS "draft_rate",
    s."improves" / NULLIF(s."nodes", 0) AS "improve_rate",
    s."debugs" / NULLIF(s."nodes", 0) AS "debug_rate",
    s."reward_node_mean",
    s."valid_reward_mean",
    s."draft_reward_mean",       -- mean reward of the ok drafts
    s."reward_best",
    s."best_test_metric_recount",
    coalesce(g."groups", 0) AS "groups",
    g."groups_with_signal" / NULLIF(g."groups", 0) AS "groups_with_signal_rate",
    CASE WHEN coalesce(s."distinct_rewards", 0) > 1 THEN 1 ELSE 0 END AS "reward_spread",
    s."mean_response_tokens",     -- mean len(response_token_ids)
    c."response_cap",             -- the run's response cap (run_caps; NULL: unknown arm or cap)
    CASE WHEN c."response_cap" IS NOT NULL
         THEN s."at_or_over_cap" / NULLIF(s."nodes", 0) END AS "resp_clip_rate",
    CASE WHEN c."response_cap" IS NOT NULL
         THEN coalesce(s."at_cap", 0) END AS "clipped_at_cap",
    CASE WHEN coalesce(tr."summary_present", FALSE) THEN 1 ELSE 0 END AS "complete"  -- 1: a summary exists
FROM keys AS k
LEFT JOIN node_stats AS s USING ("run_id", "round", "task")
LEFT JOIN group_stats AS g USING ("run_id", "round", "task")
LEFT JOIN "task_rounds" AS tr USING ("run_id", "round", "task")
LEFT JOIN caps AS c ON c."run_id" = k."run_id";
