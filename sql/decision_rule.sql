-- decision_rule: one row per run, task and round k of the run (run_id, task, k).
--
-- The pre-registered decision rule of data root 000: delta = valid_reward_mean(run, k) minus
-- valid_reward_mean at the first round of the run's lineage root (resume links followed back,
-- recursively, by run_lineage), for the same task; moved = delta > 0. The reading at step k
-- counts the tasks that moved:  SELECT count(*) FILTER (WHERE moved) ... WHERE k = 9.
-- Rows: every task-round of the run (as in task_round_metrics). first_round is the root run's
-- lowest round. delta (and moved) is NULL when either side has no ok node, or when the root
-- is not in the warehouse. valid_reward_mean is recomputed here (mean reward of the ok nodes,
-- as in task_round_metrics) so this view stands alone.
CREATE OR REPLACE VIEW "decision_rule" AS
WITH
task_round_means AS MATERIALIZED (
    SELECT k."run_id", k."round", k."task", m."valid_reward_mean"
    FROM (SELECT "run_id", "round", "task" FROM "task_rounds"
          UNION
          SELECT DISTINCT "run_id", "round", "task" FROM "nodes") AS k
    LEFT JOIN (SELECT "run_id", "round", "task", avg("reward") AS "valid_reward_mean"
               FROM "nodes" WHERE "status" = 'ok'
               GROUP BY "run_id", "round", "task") AS m USING ("run_id", "round", "task")
),
first_rounds AS (
    SELECT "run_id", min("round") AS "first_round"
    FROM task_round_means
    GROUP BY "run_id"
),
roots AS (
    SELECT "run_id", "ancestor_run_id" AS "root_run_id"
    FROM "run_lineage"
    WHERE "is_root"
),
rule AS (
    SELECT
        t."run_id",
        t."task",
        t."round" AS "k",
        coalesce(o."root_run_id", t."run_id") AS "root_run_id",
        f."first_round",
        t."valid_reward_mean" - b."valid_reward_mean" AS "delta"
    FROM task_round_means AS t
    LEFT JOIN roots AS o ON o."run_id" = t."run_id"
    LEFT JOIN first_rounds AS f ON f."run_id" = coalesce(o."root_run_id", t."run_id")
    LEFT JOIN task_round_means AS b
           ON b."run_id" = f."run_id" AND b."round" = f."first_round" AND b."task" = t."task"
)
SELECT
    "run_id",
    "task",
    "k",
    "root_run_id",
    "first_round",       -- the lineage root's first round (the baseline)
    "delta",             -- valid_reward_mean(run, k) - valid_reward_mean(root, first_round)
    "delta" > 0 AS "moved"
FROM rule;
