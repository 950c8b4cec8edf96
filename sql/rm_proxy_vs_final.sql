-- rm_proxy_vs_final: one row per reward-model artifact (run, job, progress) scored both on
-- the full final split and on the proxy rows (a proxy evaluation, or the final evaluator's
-- diagnostic on the exact proxy rows), pairing the two scores of the same artifact.
--   proxy_split       : proxy | proxy_rows
--   final_minus_proxy : final_score - proxy_score (scores on different splits are not one
--                       protocol: this says how far the proxy was from the final, nothing more)
CREATE OR REPLACE VIEW "rm_proxy_vs_final" AS
SELECT
    f."run_id",
    f."job",
    f."progress",
    p."evaluation_id" AS "proxy_evaluation_id",
    p."split" AS "proxy_split",
    p."evaluator" AS "proxy_evaluator",
    p."n" AS "proxy_n",
    p."score" AS "proxy_score",
    p."se" AS "proxy_se",
    f."evaluation_id" AS "final_evaluation_id",
    f."evaluator" AS "final_evaluator",
    f."n" AS "final_n",
    f."score" AS "final_score",
    f."se" AS "final_se",
    f."official" AS "final_official",
    f."score" - p."score" AS "final_minus_proxy"
FROM "rm_evaluations" AS f
JOIN "rm_evaluations" AS p
  ON p."run_id" = f."run_id"
 AND p."job" IS NOT DISTINCT FROM f."job"
 AND p."progress" IS NOT DISTINCT FROM f."progress"
 AND p."split" IN ('proxy', 'proxy_rows')
WHERE f."split" = 'full';
