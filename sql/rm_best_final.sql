-- rm_best_final: one row per reward-model run that has an official final score. Its best
-- official final (full split) evaluation, "best" in the evaluator's direction (maximize by
-- default; ties: the greater progress), against the run's same-protocol reference.
--   gap   : score - reference_score (negative: below the reference, for maximize)
--   ratio : score / reference_score
--   official_finals : how many official full-split evaluations the run has
CREATE OR REPLACE VIEW "rm_best_final" AS
WITH finals AS (
    SELECT e.*,
           row_number() OVER (
               PARTITION BY e."run_id"
               ORDER BY CASE WHEN e."direction" = 'minimize' THEN e."score" ELSE -e."score" END,
                        e."progress" DESC, e."evaluation_id"
           ) AS "rank",
           count(*) OVER (PARTITION BY e."run_id") AS "official_finals"
    FROM "rm_evaluations" AS e
    WHERE e."split" = 'full' AND e."official" AND e."score" IS NOT NULL
)
SELECT
    f."run_id",
    f."evaluation_id",
    f."phase",
    f."job",
    f."progress",
    f."evaluator",
    f."direction",
    f."n",
    f."score",
    f."se",
    f."official_finals",
    ref."reference_id",
    ref."score" AS "reference_score",
    ref."protocol" AS "reference_protocol",
    f."score" - ref."score" AS "gap",
    f."score" / NULLIF(ref."score", 0) AS "ratio"
FROM finals AS f
LEFT JOIN "rm_runs" AS rr ON rr."run_id" = f."run_id"
LEFT JOIN "rm_references" AS ref ON ref."reference_id" = rr."reference_id"
WHERE f."rank" = 1;
