-- rm_violations: one row per offending row of the reward-model checks (10-15; data root 004,
-- docs/reward_model.md). Empty on clean data. `warehouse check` evaluates the row-level ones
-- (10, 11, 12) as native Great Expectations expectations and reads the cross-row ones (13,
-- 14, 15) from this view; tests/warehouse/quality proves both agree.
--   job    : the evaluation's / artifact's / step's job (NULL when it has none)
--   item   : the evaluation id, "section <name> of <evaluation>", "progress <N>" or "step <N>"
--   detail : what is wrong
-- Checks: 10 score in [0, 100]; 11 n > 0 and the standard error consistent with n (within
-- 0.5x-2x of the binomial 100*sqrt(p(1-p)/n), p = score/100: a weighted design effect moves
-- it a little, an SE computed on the other split's n moves it by sqrt(2985/512) = 2.4x);
-- 12 official exactly when a receipt matches the summary (sha256 and size), and every
-- formal full-split (final) score official; 13 at most three retained artifacts per run;
-- 14 progress strictly increasing within a job (artifacts in publishing order, steps in
-- log order); 15 the proxy rows a subset of the full split (proxy n <= full n).
CREATE OR REPLACE VIEW "rm_violations" AS
WITH evals AS (
    SELECT e.*,
           coalesce(e."receipt_sha256" = e."summary_sha256"
                    AND e."receipt_size" = e."summary_size", false) AS "receipt_matches",
           -- a score outside 0-100 gives NaN, as DuckDB 2 did (DuckDB 1.5 raises on sqrt(< 0))
           100 * CASE WHEN (e."score" / 100) * (1 - e."score" / 100) / NULLIF(e."n", 0) < 0
                      THEN CAST('NaN' AS DOUBLE)
                      ELSE sqrt((e."score" / 100) * (1 - e."score" / 100) / NULLIF(e."n", 0)) END AS "se_binomial"
    FROM "rm_evaluations" AS e
),
artifact_order AS (
    SELECT a."run_id", a."job", a."progress",
           lag(a."progress") OVER (PARTITION BY a."run_id", a."job"
                                   ORDER BY a."source_id", a."line_no") AS "previous"
    FROM "rm_artifacts" AS a
),
step_order AS (
    SELECT s."run_id", s."job", s."step",
           lag(s."step") OVER (PARTITION BY s."run_id", s."job"
                               ORDER BY s."source_id", s."line_no") AS "previous"
    FROM "rm_steps" AS s
),
retained AS (
    SELECT a."run_id", a."job", a."progress",
           count(*) OVER (PARTITION BY a."run_id") AS "retained_count"
    FROM "rm_artifacts" AS a
    WHERE a."retained"
),
full_n AS (
    SELECT "run_id", min("n") AS "n" FROM "rm_evaluations"
    WHERE "split" = 'full' AND "n" > 0 GROUP BY ALL
)
SELECT 10 AS "check_no", "run_id", "job", "evaluation_id" AS "item",
       'score ' || coalesce(CAST("score" AS VARCHAR), 'NULL') || ' is not in [0, 100]' AS "detail"
FROM evals WHERE "score" IS NULL OR "score" < 0 OR "score" > 100
UNION ALL
SELECT 10, s."run_id", e."job", 'section ' || s."section" || ' of ' || s."evaluation_id",
       'section score ' || coalesce(CAST(s."score" AS VARCHAR), 'NULL') || ' is not in [0, 100]'
FROM "rm_eval_sections" AS s
LEFT JOIN "rm_evaluations" AS e USING ("run_id", "evaluation_id")
WHERE s."score" IS NULL OR s."score" < 0 OR s."score" > 100
UNION ALL
SELECT 11, "run_id", "job", "evaluation_id",
       CASE WHEN "n" IS NULL OR "n" <= 0
            THEN 'n ' || coalesce(CAST("n" AS VARCHAR), 'NULL') || ' is not > 0'
            WHEN "se" IS NULL OR "se" < 0
            THEN 'standard error ' || coalesce(CAST("se" AS VARCHAR), 'NULL') || ' is not >= 0'
            ELSE 'standard error ' || CAST("se" AS VARCHAR) || ' is not consistent with n '
                 || CAST("n" AS VARCHAR) || ' (binomial ' || CAST(round("se_binomial", 4) AS VARCHAR)
                 || ')' END
FROM evals
WHERE "n" IS NULL OR "n" <= 0 OR "se" IS NULL OR "se" < 0
   OR ("score" BETWEEN 0 AND 100
       AND ("se" < 0.5 * "se_binomial" - 1e-9 OR "se" > 2 * "se_binomial" + 1e-9))
UNION ALL
SELECT 12, "run_id", "job", "evaluation_id",
       CASE WHEN "official" IS DISTINCT FROM "receipt_matches"
            THEN 'official is ' || coalesce(CAST("official" AS VARCHAR), 'NULL')
                 || ' but the receipt ' || (CASE WHEN "receipt_matches" THEN 'matches'
                                                 ELSE 'does not match' END)
            ELSE 'final score not official: ' || (CASE "receipt_status"
                 WHEN 'missing' THEN 'no receipt' ELSE 'receipt does not match its summary' END)
       END
FROM evals
WHERE "official" IS DISTINCT FROM "receipt_matches"
   OR ("phase" = 'formal' AND "split" = 'full' AND NOT coalesce("official", false))
UNION ALL
SELECT 13, "run_id", "job", 'progress ' || CAST("progress" AS VARCHAR),
       'the run retains ' || CAST("retained_count" AS VARCHAR) || ' artifacts (at most 3)'
FROM retained WHERE "retained_count" > 3
UNION ALL
SELECT 14, "run_id", "job", 'progress ' || CAST("progress" AS VARCHAR),
       'progress ' || CAST("progress" AS VARCHAR) || ' after ' || CAST("previous" AS VARCHAR)
       || ': artifacts must be published in increasing progress'
FROM artifact_order WHERE "progress" <= "previous"
UNION ALL
SELECT 14, "run_id", "job", 'step ' || CAST("step" AS VARCHAR),
       'step ' || CAST("step" AS VARCHAR) || ' after ' || CAST("previous" AS VARCHAR)
       || ': steps must increase'
FROM step_order WHERE "step" <= "previous"
UNION ALL
SELECT 15, e."run_id", e."job", e."evaluation_id",
       e."split" || ' n ' || CAST(e."n" AS VARCHAR) || ' exceeds the full split''s n '
       || CAST(f."n" AS VARCHAR) || ': the proxy rows must be a subset of the full split'
FROM "rm_evaluations" AS e
JOIN full_n AS f USING ("run_id")
WHERE e."split" IN ('proxy', 'proxy_rows') AND e."n" > f."n";
