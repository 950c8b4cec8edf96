-- rm_section_deltas: one row per reward-model run, section and ordered pair of evaluations
-- (from -> to) scored on the same rows: both on the full split, or both on the proxy rows
-- (a proxy evaluation and a proxy-rows diagnostic count as the same rows). Pick the pair
-- with WHERE from_evaluation_id = ... AND to_evaluation_id = ...
--   delta : to_score - from_score for the section
CREATE OR REPLACE VIEW "rm_section_deltas" AS
WITH scored AS (
    SELECT s."run_id", s."evaluation_id", s."section", s."score", e."job", e."progress",
           e."split", CASE WHEN e."split" = 'full' THEN 'full' ELSE 'proxy' END AS "rows"
    FROM "rm_eval_sections" AS s
    JOIN "rm_evaluations" AS e USING ("run_id", "evaluation_id")
)
SELECT
    a."run_id",
    a."section",
    a."rows",
    a."evaluation_id" AS "from_evaluation_id",
    a."job" AS "from_job",
    a."progress" AS "from_progress",
    a."score" AS "from_score",
    b."evaluation_id" AS "to_evaluation_id",
    b."job" AS "to_job",
    b."progress" AS "to_progress",
    b."score" AS "to_score",
    b."score" - a."score" AS "delta"
FROM scored AS a
JOIN scored AS b
  ON b."run_id" = a."run_id" AND b."section" = a."section" AND b."rows" = a."rows"
 AND b."evaluation_id" <> a."evaluation_id";
