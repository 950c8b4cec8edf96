-- rm_scores_by_progress: one row per reward-model evaluation, in progress order within its
-- series (run, job, split, evaluator): the score by progress, the change from the previous
-- point, and whether the series is monotonic.
--   change     : score - previous score of the series (NULL on its first point)
--   trend      : up | down | flat from the previous point
--   monotonic  : the whole series never both rises and falls (false: non-monotonic)
CREATE OR REPLACE VIEW "rm_scores_by_progress" AS
WITH points AS (
    SELECT e."run_id", e."phase", e."unit", e."job", e."split", e."evaluator", e."progress",
           e."evaluation_id", e."n", e."score", e."se", e."official",
           e."score" - lag(e."score") OVER (
               PARTITION BY e."run_id", e."job", e."split", e."evaluator"
               ORDER BY e."progress", e."evaluation_id") AS "change"
    FROM "rm_evaluations" AS e
)
SELECT
    p.*,
    CASE WHEN p."change" > 0 THEN 'up' WHEN p."change" < 0 THEN 'down'
         WHEN p."change" = 0 THEN 'flat' END AS "trend",
    NOT (coalesce(bool_or(p."change" > 0) OVER s, false)
         AND coalesce(bool_or(p."change" < 0) OVER s, false)) AS "monotonic"
FROM points AS p
WINDOW s AS (PARTITION BY p."run_id", p."job", p."split", p."evaluator");
