-- rm_exploration_vs_formal: one row per reward-model run, exploration proxy evaluation and
-- formal proxy-rows diagnostic: does an exploration conclusion survive on the formal
-- artifact, scored on the identical proxy rows?
--   submitted         : the exploration job is the evidence the submitted method rests on
--                       (rm_jobs.submitted)
--   exploration_best  : the best exploration proxy score of the run (direction-aware)
--   delta             : formal_score - exploration_score
--   delta_se          : sqrt(exploration_se^2 + formal_se^2), descriptive only
--   survived          : the formal score is not worse than the exploration score by more
--                       than 1.96 delta_se, in the evaluator's direction
CREATE OR REPLACE VIEW "rm_exploration_vs_formal" AS
WITH exploration AS (
    SELECT e.*,
           CASE WHEN e."direction" = 'minimize' THEN -1 ELSE 1 END AS "sign",
           e."score" = (CASE WHEN e."direction" = 'minimize'
                             THEN min(e."score") OVER (PARTITION BY e."run_id")
                             ELSE max(e."score") OVER (PARTITION BY e."run_id") END)
               AS "exploration_best"
    FROM "rm_evaluations" AS e
    WHERE e."phase" = 'exploration' AND e."split" = 'proxy'
),
jobs AS (
    SELECT "run_id", "job", bool_or(coalesce("submitted", false)) AS "submitted"
    FROM "rm_jobs" GROUP BY ALL
)
SELECT
    x."run_id",
    x."unit",
    x."job" AS "exploration_job",
    x."evaluation_id" AS "exploration_evaluation_id",
    x."progress" AS "exploration_progress",
    coalesce(j."submitted", false) AS "submitted",
    x."exploration_best",
    x."score" AS "exploration_score",
    x."se" AS "exploration_se",
    d."evaluation_id" AS "formal_evaluation_id",
    d."progress" AS "formal_progress",
    d."score" AS "formal_score",
    d."se" AS "formal_se",
    d."score" - x."score" AS "delta",
    sqrt(x."se" ^ 2 + d."se" ^ 2) AS "delta_se",
    x."sign" * (d."score" - x."score") >= -1.96 * sqrt(x."se" ^ 2 + d."se" ^ 2) AS "survived"
FROM exploration AS x
JOIN "rm_evaluations" AS d
  ON d."run_id" = x."run_id" AND d."phase" = 'formal' AND d."split" = 'proxy_rows'
LEFT JOIN jobs AS j ON j."run_id" = x."run_id" AND j."job" = x."job";
