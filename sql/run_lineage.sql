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
-- The links are followed over the runs table only (a row per run): a run with records but no
-- runs row has no resume link, so its lineage is itself (`unregistered`). A filter on run_id
-- reaches that branch's scan of nodes; the recursion cannot take one, and walks the runs.
-- The runs table is read once (`run_links`, read by four parts, is materialized): on DuckLake
-- every read of a table, and every step of the recursion, costs its catalog queries.
run_links AS (
    SELECT "run_id", "resumed_from_run" FROM "runs"
),
chain("run_id", "ancestor_run_id", "depth", "path") AS (
    SELECT "run_id", "run_id", 0, ["run_id"]
    FROM run_links
    UNION ALL
    SELECT c."run_id", r."resumed_from_run", c."depth" + 1,
           list_append(c."path", r."resumed_from_run")
    FROM chain AS c
    JOIN run_links AS r ON r."run_id" = c."ancestor_run_id"
    WHERE r."resumed_from_run" IS NOT NULL
      AND NOT list_contains(c."path", r."resumed_from_run")
),
unregistered AS (
    SELECT DISTINCT n."run_id"
    FROM "nodes" AS n
    WHERE NOT EXISTS (SELECT 1 FROM run_links AS r WHERE r."run_id" = n."run_id")
),
links AS (
    SELECT "run_id", "ancestor_run_id", "depth" FROM chain
    UNION ALL
    SELECT "run_id", "run_id", 0 FROM unregistered
)
SELECT
    c."run_id",
    c."ancestor_run_id",
    c."depth",                                   -- 0 = the run itself, 1 = the run it resumed from, ...
    r."run_id" IS NOT NULL AS "ancestor_known",  -- FALSE: named by a resume link, not in the warehouse
    c."depth" = max(c."depth") OVER (PARTITION BY c."run_id") AS "is_root"
FROM links AS c
LEFT JOIN run_links AS r ON r."run_id" = c."ancestor_run_id";
