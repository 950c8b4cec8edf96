-- node_parents: one row per node record that has a parent_id, with the parent it names.
--
-- The parent is looked up by node id in the child's run lineage (run_lineage): first in the
-- child's own run, then in the run it resumed from, and so on back to the root, because a
-- resumed run continues the tree of the run it resumed from. When the id matches several
-- records (duplicate ids), the nearest run wins, then the copy from the latest round not
-- after the child's round, then the smallest (task, source line). A parent_id that names no
-- record of the lineage gives parent_found = FALSE and a NULL parent_status.
--
-- Written so that a filter on run_id (one run's page) or on (source_id, line_no) (a page's
-- nodes) reaches the nodes scan: the CTEs are not materialized, the nearest parent is a
-- grouped arg_min over the child's key, run_id included, rather than a window (a row_number
-- over every child, which DuckDB neither pushes a filter through nor runs cheaply), and the
-- sort key (depth, later, distance, task, source_id, line_no) is unique per candidate, so the
-- pick is the same.
CREATE OR REPLACE VIEW "node_parents" AS
WITH
children AS NOT MATERIALIZED (
    SELECT "source_id", "line_no", "run_id", "round", "task", "node_id", "mode", "status",
           "parent_id"
    FROM "nodes"
    WHERE "parent_id" IS NOT NULL
),
nearest AS NOT MATERIALIZED (
    SELECT c."run_id", c."source_id", c."line_no",
           arg_min({'run_id': p."run_id", 'round': p."round", 'status': p."status"},
                   {'depth': l."depth",
                    'later': CASE WHEN p."round" <= c."round" THEN 0 ELSE 1 END,
                    'distance': abs(c."round" - p."round"),
                    'task': p."task", 'source_id': p."source_id", 'line_no': p."line_no"}) AS "parent"
    FROM children AS c
    JOIN "run_lineage" AS l ON l."run_id" = c."run_id"
    JOIN "nodes" AS p ON p."run_id" = l."ancestor_run_id" AND p."node_id" = c."parent_id"
    GROUP BY c."run_id", c."source_id", c."line_no"
)
SELECT
    c."source_id", c."line_no", c."run_id", c."round", c."task", c."node_id", c."mode",
    c."status", c."parent_id",
    p."parent" IS NOT NULL AS "parent_found",
    p."parent"."run_id" AS "parent_run_id",
    p."parent"."round" AS "parent_round",
    p."parent"."status" AS "parent_status"
FROM children AS c
LEFT JOIN nearest AS p
       ON p."run_id" = c."run_id" AND p."source_id" = c."source_id" AND p."line_no" = c."line_no";
