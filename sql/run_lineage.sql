-- run_lineage: one row per run and each run of its lineage (itself included), nearest first.
--
-- A resumed run continues the tree and the checkpoint of the run it resumed from
-- (runs.resumed_from_run); following that link back, recursively, ends at the lineage root.
-- Used by run_metrics (a node's parent may live in an earlier run of the lineage) and by
-- decision_rule (the baseline is the root's first round). A link to a run the warehouse does
-- not hold still yields a row (ancestor_known = FALSE): the root is then that unknown run,
-- never a guess. Cycles in the links are cut (a run appears at most once per lineage).
CREATE OR REPLACE VIEW "run_lineage" AS
WITH RECURSIVE
-- DISTINCT over UNION ALL, not UNION: DuckDB 1.4 (which BI tools still carry) keeps the
-- duplicates of a plain UNION in a non-recursive CTE under WITH RECURSIVE.
all_runs AS (
    SELECT DISTINCT "run_id" FROM (
        SELECT "run_id" FROM "runs"
        UNION ALL
        SELECT "run_id" FROM "nodes"
    )
),
chain("run_id", "ancestor_run_id", "depth", "path") AS (
    SELECT "run_id", "run_id", 0, ["run_id"]
    FROM all_runs
    UNION ALL
    SELECT c."run_id", r."resumed_from_run", c."depth" + 1,
           list_append(c."path", r."resumed_from_run")
    FROM chain AS c
    JOIN "runs" AS r ON r."run_id" = c."ancestor_run_id"
    WHERE r."resumed_from_run" IS NOT NULL
      AND NOT list_contains(c."path", r."resumed_from_run")
)
SELECT
    c."run_id",
    c."ancestor_run_id",
    c."depth",                                   -- 0 = the run itself, 1 = the run it resumed from, ...
    r."run_id" IS NOT NULL AS "ancestor_known",  -- FALSE: named by a resume link, not in the warehouse
    c."depth" = max(c."depth") OVER (PARTITION BY c."run_id") AS "is_root"
FROM chain AS c
LEFT JOIN "runs" AS r ON r."run_id" = c."ancestor_run_id";
