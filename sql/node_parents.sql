-- node_parents: one row per node record that has a parent_id, with the parent it names.
--
-- The parent is looked up by node id in the child's run lineage (run_lineage): first in the
-- child's own run, then in the run it resumed from, and so on back to the root, because a
-- resumed run continues the tree of the run it resumed from. When the id matches several
-- records (duplicate ids), the nearest run wins, then the copy from the latest round not
-- after the child's round, then the smallest (task, source line). A parent_id that names no
-- record of the lineage gives parent_found = FALSE and a NULL parent_status.
CREATE OR REPLACE VIEW "node_parents" AS
WITH
children AS (
    SELECT "source_id", "line_no", "run_id", "round", "task", "node_id", "mode", "status",
           "parent_id"
    FROM "nodes"
    WHERE "parent_id" IS NOT NULL
),
candidates AS (
    SELECT c."source_id", c."line_no",
           p."run_id" AS "parent_run_id", p."round" AS "parent_round",
           p."status" AS "parent_status",
           row_number() OVER (
               PARTITION BY c."source_id", c."line_no"
               ORDER BY l."depth",
                        CASE WHEN p."round" <= c."round" THEN 0 ELSE 1 END,
                        abs(c."round" - p."round"),
                        p."task", p."source_id", p."line_no"
           ) AS "rank"
    FROM children AS c
    JOIN "run_lineage" AS l ON l."run_id" = c."run_id"
    JOIN "nodes" AS p ON p."run_id" = l."ancestor_run_id" AND p."node_id" = c."parent_id"
)
SELECT
    c."source_id", c."line_no", c."run_id", c."round", c."task", c."node_id", c."mode",
    c."status", c."parent_id",
    p."parent_run_id" IS NOT NULL AS "parent_found",
    p."parent_run_id",
    p."parent_round",
    p."parent_status"
FROM children AS c
LEFT JOIN candidates AS p
       ON p."source_id" = c."source_id" AND p."line_no" = c."line_no" AND p."rank" = 1;
