-- rm_job_summary: one row per reward-model training job (an exploration unit's run, or the
-- formal replay): its settings, seconds and peak memory, how it ended, its artifacts and
-- its latest proxy score, so each exploration unit reads as one row.
--   remaining_s        : seconds left when the job was stopped (jobs.jsonl `remaining_s`)
--   host_mem_limit_gib : the host-memory limit an OOM hit (jobs.jsonl `host_mem_limit_gib`)
--   artifacts_published / artifacts_retained / retained_loadable : counts over rm_artifacts
--   parameters_b       : the largest artifact's parameters, in billions
--   proxy_score, proxy_se, proxy_progress : the job's proxy evaluation with the greatest
--                        progress (NULL when the job was never scored on the proxy)
CREATE OR REPLACE VIEW "rm_job_summary" AS
WITH artifacts AS (
    SELECT "run_id", "job", count(*) AS "artifacts_published",
           count(*) FILTER (WHERE "retained") AS "artifacts_retained",
           count(*) FILTER (WHERE "retained" AND "loadable") AS "retained_loadable",
           max("parameters") / 1e9 AS "parameters_b",
           string_agg(DISTINCT "dtype", ', ') AS "dtypes"
    FROM "rm_artifacts" GROUP BY ALL
),
proxy AS (
    SELECT "run_id", "job", "progress", "score", "se",
           row_number() OVER (PARTITION BY "run_id", "job" ORDER BY "progress" DESC) AS "rank"
    FROM "rm_evaluations" WHERE "split" = 'proxy'
)
SELECT
    j."run_id", j."phase", j."unit", j."job", j."title", j."pairs", j."micro_batch",
    j."grad_accum", j."learning_rate", j."seed", j."members", j."steps_planned",
    j."steps_done", j."seconds", j."peak_mem_gb", j."status", j."submitted",
    TRY_CAST(json_extract_string(j."extra", '$.remaining_s') AS DOUBLE) AS "remaining_s",
    TRY_CAST(json_extract_string(j."extra", '$.host_mem_limit_gib') AS DOUBLE)
        AS "host_mem_limit_gib",
    coalesce(a."artifacts_published", 0) AS "artifacts_published",
    coalesce(a."artifacts_retained", 0) AS "artifacts_retained",
    coalesce(a."retained_loadable", 0) AS "retained_loadable",
    a."parameters_b",
    a."dtypes",
    p."progress" AS "proxy_progress",
    p."score" AS "proxy_score",
    p."se" AS "proxy_se"
FROM "rm_jobs" AS j
LEFT JOIN artifacts AS a ON a."run_id" = j."run_id" AND a."job" = j."job"
LEFT JOIN proxy AS p ON p."run_id" = j."run_id" AND p."job" = j."job" AND p."rank" = 1;
