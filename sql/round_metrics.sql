-- round_metrics: one row per run round (run_id, round), with its step's timing when logged.
--
-- All tasks of one round of one run, and the training step that followed it: step N is the
-- update after round N, so a round joins the timing row whose step equals the round. A round
-- whose step never got a timing row (the run was killed after the rollout) keeps its row with
-- NULL timing. A round exists when its directory, one of its task-rounds or one of its node
-- records is in the warehouse; a round with 0 records has tasks = 0 and nodes = 0.
--
-- Duplicate timing rows for one step (a step logged twice, e.g. after a restart) are counted
-- in timing_rows; the LAST one written (highest source line) is the one shown, as it is the
-- update whose weights the next round used. run_metrics.steps_logged counts every row.
--
-- The round's headline (the run page's top chart): valid_reward_mean is the mean over its tasks
-- of task_round_metrics' (run_metrics reads rounds the same way), valid_rate its ok records over
-- its records, reward_best its highest reward.
--
-- The gen phase (gen_s) is generation and execution together. generation_s and execution_s are
-- the round's summaries' gen_llm_seconds and gen_exec_seconds summed over its tasks;
-- gen_overlap_s is how much of them ran at the same time as the phase's wall clock shows it
-- (generation_s + execution_s - gen_s, never below 0: a sibling group executing while the others
-- still generate); gen_other_s the rest of gen_s (planning, recording). Both are NULL where
-- either sum alone exceeds gen_s (tasks generated or executed side by side, as the seeds'
-- harness did): one process's overlap cannot explain those seconds.
--
-- The sampler-vs-trainer headline (as logprob_mismatch defines it, over all the round's tasks):
-- mult_prob_error (NeMo RL's mean exp(|logprob_train - logprob_inference|)), its max, the share
-- of tokens with |delta| > 1 and the mean k3 KL to the reference; NULL when the round was not
-- trained (imported roots, --no-learn) or no sampler logprob was recorded.
CREATE OR REPLACE VIEW "round_metrics" AS
WITH
per_task AS (
    -- per task-round, from nodes (read once here): records, distinct rewards (reward_spread as
    -- in task_round_metrics), drafts, and the ok records' count and mean reward as
    -- task_round_metrics counts them (its valid and valid_reward_mean)
    SELECT "run_id", "round", "task",
           count(*) AS "records",
           count(DISTINCT "reward") AS "distinct_rewards",
           count(*) FILTER (WHERE "mode" = 'draft') AS "drafts",
           count(*) FILTER (WHERE "status" = 'ok') AS "valid",
           avg("reward") FILTER (WHERE "status" = 'ok') AS "valid_reward_mean",
           max("reward") AS "reward_best"
    FROM "nodes"
    GROUP BY "run_id", "round", "task"
),
keys AS (
    SELECT "run_id", "round" FROM "rounds"
    UNION
    SELECT DISTINCT "run_id", "round" FROM "task_rounds"
    UNION
    SELECT DISTINCT "run_id", "round" FROM per_task
),
tasks AS (
    SELECT "run_id", "round",
           count(*) AS "tasks",
           count(*) FILTER (WHERE "distinct_rewards" > 1) AS "tasks_with_spread",
           sum("records") AS "nodes",
           sum("drafts") AS "fresh_drafts"
    FROM per_task
    GROUP BY "run_id", "round"
),
rewards AS (
    -- over the round's tasks with records, as task_round_metrics' rows with nodes > 0
    SELECT "run_id", "round",
           avg("valid_reward_mean") AS "valid_reward_mean",
           sum("valid") / NULLIF(sum("records"), 0) AS "valid_rate",
           max("reward_best") AS "reward_best"
    FROM per_task
    GROUP BY "run_id", "round"
),
summaries AS (
    SELECT "run_id", "round",
           sum("gen_llm_seconds") AS "gen_llm_seconds",
           sum("gen_exec_seconds") AS "gen_exec_seconds"
    FROM "task_rounds"
    WHERE "summary_present"
    GROUP BY "run_id", "round"
),
timing AS (
    SELECT *,
           count(*) OVER (PARTITION BY "run_id", "step") AS "timing_rows",
           -- every phase counts: a row with a phase the table has no column for keeps its
           -- whole phases_s object in extra, so sum that object's numbers instead (read as a
           -- MAP, not with a '$.phases_s.*' path: BI tools' SQL parser, sqlglot, rewrites that
           -- path into an -> DuckDB rejects, and Superset runs a view's body through it)
           CASE WHEN json_type("extra", '$.phases_s') = 'OBJECT'
                THEN list_sum(list_transform(
                         map_values(CAST(json_extract("extra", '$.phases_s') AS MAP(VARCHAR, JSON))),
                         lambda v: CASE WHEN json_type(v) IN ('BIGINT', 'UBIGINT', 'DOUBLE')
                                   THEN CAST(v AS DOUBLE) END))
                ELSE coalesce("update_weights_s", 0) + coalesce("gen_s", 0)
                     + coalesce("old_log_prob_s", 0) + coalesce("ref_s", 0) + coalesce("adv_s", 0)
                     + coalesce("update_actor_s", 0) + coalesce("save_checkpoint_s", 0)
           END AS "phase_sum_s"
    FROM "steps"
    QUALIFY row_number() OVER (PARTITION BY "run_id", "step"
                               ORDER BY "source_id" DESC, "line_no" DESC) = 1
),
mismatch AS (
    -- the task-rounds' sums (mismatch_sums), added up: weighted by compared and trained tokens
    SELECT "run_id", "round",
           sum("mult_prob_error_sum") / NULLIF(sum("compared_tokens"), 0) AS "mult_prob_error",
           max("mult_prob_error_max") AS "mult_prob_error_max",
           sum("abs_delta_gt_1") / NULLIF(sum("compared_tokens"), 0) AS "share_abs_delta_gt_1",
           sum("kl_to_ref_sum") / NULLIF(sum("trained_tokens"), 0) AS "kl_to_ref_mean"
    FROM "mismatch_sums"
    GROUP BY "run_id", "round"
)
SELECT
    k."run_id",
    k."round",
    coalesce(t."tasks", 0) AS "tasks",                          -- tasks with >= 1 record
    coalesce(t."tasks_with_spread", 0) AS "tasks_with_spread",  -- of those, rewards not all equal
    coalesce(t."nodes", 0) AS "nodes",
    coalesce(t."fresh_drafts", 0) AS "fresh_drafts",            -- 0 after round 1: shared-seed defect
    rw."valid_reward_mean",                                     -- mean over the round's tasks
    rw."valid_rate",
    rw."reward_best",
    s."gen_llm_seconds",                                        -- summed over the round's summaries
    s."gen_exec_seconds",
    tm."step",                                                  -- = round when a timing row exists
    coalesce(tm."timing_rows", 0) AS "timing_rows",             -- > 1: the step was logged twice
    tm."total_s",
    tm."update_weights_s",
    tm."gen_s",
    tm."old_log_prob_s",
    tm."ref_s",
    tm."adv_s",
    tm."update_actor_s",
    tm."save_checkpoint_s",                                     -- NULL on steps that did not save
    tm."update_weights_s" / NULLIF(tm."total_s", 0) AS "phase_share_update_weights",
    tm."gen_s" / NULLIF(tm."total_s", 0) AS "phase_share_gen",
    tm."old_log_prob_s" / NULLIF(tm."total_s", 0) AS "phase_share_old_log_prob",
    tm."ref_s" / NULLIF(tm."total_s", 0) AS "phase_share_ref",
    tm."adv_s" / NULLIF(tm."total_s", 0) AS "phase_share_adv",
    tm."update_actor_s" / NULLIF(tm."total_s", 0) AS "phase_share_update_actor",
    tm."save_checkpoint_s" / NULLIF(tm."total_s", 0) AS "phase_share_save_checkpoint",
    abs(tm."phase_sum_s" - tm."total_s") AS "phase_sum_gap",    -- |sum of phases - total_s|
    s."gen_llm_seconds" AS "generation_s",                      -- the gen phase split (see above)
    s."gen_exec_seconds" AS "execution_s",
    CASE WHEN greatest(s."gen_llm_seconds", s."gen_exec_seconds") <= tm."gen_s"
         THEN greatest(s."gen_llm_seconds" + s."gen_exec_seconds" - tm."gen_s", 0) END AS "gen_overlap_s",
    CASE WHEN greatest(s."gen_llm_seconds", s."gen_exec_seconds") <= tm."gen_s"
         THEN greatest(tm."gen_s" - s."gen_llm_seconds" - s."gen_exec_seconds", 0) END AS "gen_other_s",
    tm."total_s" / NULLIF(t."nodes", 0) AS "per_node_step_s",   -- step seconds per node of the round
    mm."mult_prob_error",                                       -- sampler vs trainer (logprob_mismatch)
    mm."mult_prob_error_max",
    mm."share_abs_delta_gt_1",
    mm."kl_to_ref_mean"
FROM keys AS k
LEFT JOIN tasks AS t USING ("run_id", "round")
LEFT JOIN rewards AS rw USING ("run_id", "round")
LEFT JOIN summaries AS s USING ("run_id", "round")
LEFT JOIN timing AS tm ON tm."run_id" = k."run_id" AND tm."step" = k."round"
LEFT JOIN mismatch AS mm ON mm."run_id" = k."run_id" AND mm."round" = k."round";
