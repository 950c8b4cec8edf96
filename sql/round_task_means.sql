-- round_task_means: one row per run round with task-rounds (run_id, round).
--
-- The compare page's round values: each of the per-task-round metrics it plots, averaged over
-- the round's tasks with equal weight per task (task_round_metrics' column of each task, NULL
-- ones left out), so a run with one large task does not read as that task alone. A round where
-- every task's value is NULL has NULL. `tasks` counts the task-rounds averaged.
-- valid_reward_mean is round_metrics' too; valid_rate and reward_best here are means of the
-- tasks' rates and bests, unlike round_metrics' (over the round's records pooled).
CREATE OR REPLACE VIEW "round_task_means" AS
SELECT
    "run_id",
    "round",
    count(*) AS "tasks",
    -- summed in task order: parallel partial sums added in whatever order could change a mean's
    -- last bit from one query to the next
    avg("valid_reward_mean" ORDER BY "task") AS "valid_reward_mean",
    avg("valid_rate" ORDER BY "task") AS "valid_rate",
    avg("reward_best" ORDER BY "task") AS "reward_best",
    avg("mean_response_tokens" ORDER BY "task") AS "mean_response_tokens",
    avg("resp_clip_rate" ORDER BY "task") AS "resp_clip_rate"
FROM "task_round_metrics"
GROUP BY "run_id", "round";
