-- run_metrics: one row per run (run_id), with its lineage.
--
-- Run-level counts and rates of docs/metrics.md over every record of the run, the partial last
-- round included. Rates are NULL when their denominator is empty. Lineage columns come from
-- the runs table (the data root's manifest) and run_lineage; the state from run_state.
--
-- The headline columns (the dashboard's runs table and `warehouse metrics --view run_metrics`
-- show them): a round's valid_reward_mean is the mean over its tasks of task_round_metrics'
-- valid_reward_mean (the compare page's round value); _latest is the run's highest round with
-- records, _best the highest round value. valid_rate and reward_best are over every record of
-- the run; loss_latest is step_metrics' loss at the run's highest step (NULL where the run
-- logged no step metrics: imported roots, --no-learn).
CREATE OR REPLACE VIEW "run_metrics" AS
WITH
node_groups AS (
    -- the run's records grouped once by (run, round, task, status): every count and rate over
    -- nodes below is summed from these groups, so the view reads nodes once (each read of a
    -- table is a scan, and on DuckLake each scan costs its catalog queries)
    SELECT "run_id", "round", "task", "status",
           count(*) AS "n",
           count(*) FILTER (WHERE "schema_kind" IN ('B', 'C')) AS "with_resources_field",
           count(*) FILTER (WHERE "resources_gpu" >= 1) AS "gpu_declared",
           count(*) FILTER (WHERE "decl_malformed") AS "decl_malformed",
           count(*) FILTER (WHERE "exc_type" = 'GpuIdleError') AS "gpu_idle_kills",
           count(*) FILTER (WHERE NOT coalesce("reward" BETWEEN 0 AND 1, FALSE)) AS "rewards_out_of_range",
           avg("reward") AS "reward_mean",
           max("reward") AS "reward_max"
    FROM "nodes"
    GROUP BY "run_id", "round", "task", "status"
),
keys AS (
    SELECT "run_id" FROM "runs"
    UNION SELECT DISTINCT "run_id" FROM node_groups
    UNION SELECT DISTINCT "run_id" FROM "task_rounds"
    UNION SELECT DISTINCT "run_id" FROM "steps"
),
roots AS (
    SELECT "run_id", "ancestor_run_id" AS "root_run_id", "depth" AS "lineage_depth"
    FROM "run_lineage"
    WHERE "is_root"
),
node_stats AS (
    SELECT "run_id",
           sum("n")::BIGINT AS "nodes",
           count(DISTINCT "round") AS "rounds",
           -- "carries the field": schema B and C records have resources/decl_* keys
           sum("with_resources_field")::BIGINT AS "with_resources_field",
           sum("gpu_declared")::BIGINT AS "gpu_declared",
           sum("decl_malformed")::BIGINT AS "decl_malformed_count",
           sum("gpu_idle_kills")::BIGINT AS "gpu_idle_kills",
           coalesce(sum("n") FILTER (WHERE "status" = 'ok'), 0) / sum("n") AS "valid_rate",
           max("reward_max") AS "reward_best",
           -- the run's tasks, sorted and comma-joined: runs on the same tasks share it
           string_agg(DISTINCT "task", ',' ORDER BY "task") AS "task_set"
    FROM node_groups
    GROUP BY "run_id"
),
steps_logged AS (
    SELECT "run_id", count(*) AS "steps_logged"
    FROM "steps"
    GROUP BY "run_id"
),
steps_missing AS (
    SELECT r."run_id", count(*) AS "steps_missing"
    FROM (SELECT DISTINCT "run_id", "round" FROM node_groups) AS r
    WHERE NOT EXISTS (SELECT 1 FROM "steps" AS s
                      WHERE s."run_id" = r."run_id" AND s."step" = r."round")
    GROUP BY r."run_id"
),
parent_rates AS (
    SELECT "run_id",
           count(*) FILTER (WHERE "mode" = 'improve' AND "parent_status" = 'ok' AND "status" = 'ok')
             / NULLIF(count(*) FILTER (WHERE "mode" = 'improve' AND "parent_status" = 'ok'), 0)
             AS "improve_keeps_valid",
           count(*) FILTER (WHERE "mode" = 'debug' AND "parent_found"
                              AND "parent_status" IS DISTINCT FROM 'ok' AND "status" = 'ok')
             / NULLIF(count(*) FILTER (WHERE "mode" = 'debug' AND "parent_found"
                                         AND "parent_status" IS DISTINCT FROM 'ok'), 0)
             AS "debug_fixes_parent"
    FROM "node_parents"
    GROUP BY "run_id"
),
first_round AS (
    -- the run's lowest round that has a task-round (a node file or a summary), and its health
    -- gate: every task of that round has >= 1 ok node, and every ok node there has a reward in
    -- [0, 1] (task_round_metrics' valid and valid_rewards_out_of_range, counted as it counts
    -- them). Read from the run's task-rounds with their ok records' counts, the lowest round
    -- picked by a window over the run: every CTE here but node_groups is read once, so none is
    -- materialized and a filter on run_id reaches node_groups' read of nodes
    SELECT "run_id", "round" AS "first_round",
           bool_and(coalesce("valid", 0) >= 1)
             AND bool_and(coalesce("valid_rewards_out_of_range", 0) = 0) AS "health_gate_step1"
    FROM (SELECT *, min("round") OVER (PARTITION BY "run_id") AS "lowest"
          FROM (SELECT "run_id", "round", "task",
                       sum("n") FILTER (WHERE "status" = 'ok') AS "valid",
                       sum("rewards_out_of_range") FILTER (WHERE "status" = 'ok')
                         AS "valid_rewards_out_of_range"
                FROM (SELECT "run_id", "round", "task", NULL AS "status", 0 AS "n",
                             0 AS "rewards_out_of_range"
                      FROM "task_rounds"
                      UNION ALL
                      SELECT "run_id", "round", "task", "status", "n", "rewards_out_of_range"
                      FROM node_groups) AS task_round_rows
                GROUP BY "run_id", "round", "task") AS task_round_counts) AS by_run
    WHERE "round" = "lowest"
    GROUP BY "run_id", "round"
),
round_means AS (
    -- one row per run round: the mean over the round's tasks (tasks with no value left out) of
    -- each task's valid_reward_mean, defined as task_round_metrics defines it (the mean reward of
    -- its ok records: the mean of node_groups' ok group); read here, as the whole
    -- task_round_metrics view would double this view's cost on the runs page
    SELECT "run_id", "round", avg("valid_reward_mean") AS "valid_reward_mean"
    FROM (SELECT "run_id", "round", "task", max("reward_mean") FILTER (WHERE "status" = 'ok') AS "valid_reward_mean"
          FROM node_groups
          GROUP BY "run_id", "round", "task") AS per_task
    GROUP BY "run_id", "round"
),
reward_rounds AS (
    SELECT "run_id",
           max("round") AS "last_round",
           first("valid_reward_mean" ORDER BY "round" DESC) AS "valid_reward_mean_latest",
           max("valid_reward_mean") AS "valid_reward_mean_best"
    FROM round_means
    GROUP BY "run_id"
),
last_loss AS (
    SELECT "run_id", first("loss" ORDER BY "step" DESC) AS "loss_latest"
    FROM "step_metrics"
    GROUP BY "run_id"
),
status_json AS (
    SELECT "run_id",
           '{' || string_agg(to_json(coalesce("status", 'null'))::VARCHAR || ': ' || "n", ', '
                             ORDER BY "status" NULLS LAST) || '}' AS "status_counts"
    FROM (SELECT "run_id", "status", sum("n")::BIGINT AS "n" FROM node_groups GROUP BY "run_id", "status")
    GROUP BY "run_id"
)
SELECT
    k."run_id",
    r."arm",
    r."kind",
    r."lost",
    st."state",                           -- running, finished, failed, stopped, lost, imported (run_state)
    r."question_id",
    r."model",
    c."response_cap",                     -- the caps the run generated under (run_caps)
    c."total_cap",
    ns."task_set",
    rr."last_round",
    rr."valid_reward_mean_latest",        -- mean over tasks at the last round
    rr."valid_reward_mean_best",          -- the best round's mean over tasks
    ns."valid_rate",                      -- ok records / records, every round
    ns."reward_best",                     -- the highest reward of any record
    ll."loss_latest",                     -- step_metrics.loss at the highest step
    st."last_activity_at",                -- the run's own clock (run_state)
    r."resumed_from_run",                 -- lineage: the run this one resumed from ...
    r."resumed_from_step",                -- ... and the step of its checkpoint
    coalesce(o."root_run_id", k."run_id") AS "root_run_id",
    coalesce(o."lineage_depth", 0) AS "lineage_depth",  -- resume links back to the root
    coalesce(ns."nodes", 0) AS "nodes",
    coalesce(ns."rounds", 0) AS "rounds",                -- round directories with >= 1 record
    coalesce(sl."steps_logged", 0) AS "steps_logged",    -- timing rows
    coalesce(sm."steps_missing", 0) AS "steps_missing",  -- rounds with records, no timing row
    sj."status_counts",                                  -- JSON {status: n}; see run_status_counts
    pr."improve_keeps_valid",
    pr."debug_fixes_parent",
    CASE WHEN ns."with_resources_field" > 0
         THEN ns."gpu_declared" / ns."nodes" END AS "gpu_declared_rate",
    coalesce(ns."decl_malformed_count", 0) AS "decl_malformed_count",
    coalesce(ns."gpu_idle_kills", 0) AS "gpu_idle_kills",
    fr."first_round",
    fr."health_gate_step1"
FROM keys AS k
LEFT JOIN "runs" AS r USING ("run_id")
LEFT JOIN "run_state" AS st USING ("run_id")
LEFT JOIN roots AS o USING ("run_id")
LEFT JOIN node_stats AS ns USING ("run_id")
LEFT JOIN steps_logged AS sl USING ("run_id")
LEFT JOIN steps_missing AS sm USING ("run_id")
LEFT JOIN parent_rates AS pr USING ("run_id")
LEFT JOIN first_round AS fr USING ("run_id")
LEFT JOIN status_json AS sj USING ("run_id")
LEFT JOIN "run_caps" AS c USING ("run_id")
LEFT JOIN reward_rounds AS rr USING ("run_id")
LEFT JOIN last_loss AS ll USING ("run_id");
