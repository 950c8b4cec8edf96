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
-- nodes) reaches the children: `children`, read three times, is materialized (DuckDB's default
-- for a CTE read more than once; a view stored in a DuckDB file keeps no MATERIALIZED hint, so
-- none is written), read from nodes once, and the filter applied to it; the nearest parent is
-- a grouped arg_min over the child's key, run_id included, rather than a window (a row_number
-- over every child, which DuckDB neither pushes a filter through nor runs cheaply), and the
-- sort key (depth, later, distance, task, source_id, line_no) is unique per candidate, so the
-- pick is the same.
CREATE OR REPLACE VIEW "node_parents" AS
WITH
children AS (
    SELECT "source_id", "line_no", "run_id", "round", "task", "node_id", "mode", "status",
           "parent_id"
    FROM "nodes"
    WHERE "parent_id" IS NOT NULL
),
candidates AS (
    -- the records of the child's own run with the parent's id (depth 0), then those of the
    -- earlier runs of its lineage, read only for children of a resumed run: joined by (run,
    -- node id) from the start, never by node id alone (a warehouse of 30 copies of one root
    -- under other run ids matched each child to 30 records first: 1.3 s of every runs page)
    SELECT c."run_id", c."source_id", c."line_no", c."round", 0 AS "depth", p."run_id" AS "p_run_id",
           p."round" AS "p_round", p."status" AS "p_status", p."task" AS "p_task",
           p."source_id" AS "p_source_id", p."line_no" AS "p_line_no"
    FROM children AS c
    JOIN "nodes" AS p ON p."run_id" = c."run_id" AND p."node_id" = c."parent_id"
    UNION ALL
    SELECT c."run_id", c."source_id", c."line_no", c."round", l."depth", p."run_id", p."round", p."status",
           p."task", p."source_id", p."line_no"
    FROM (SELECT c.* FROM children AS c
          SEMI JOIN "runs" AS r ON r."run_id" = c."run_id" AND r."resumed_from_run" IS NOT NULL) AS c
    JOIN "run_lineage" AS l ON l."run_id" = c."run_id" AND l."depth" > 0
    JOIN "nodes" AS p ON p."run_id" = l."ancestor_run_id" AND p."node_id" = c."parent_id"
),
nearest AS (
    SELECT "run_id", "source_id", "line_no",
           arg_min({'run_id': "p_run_id", 'round': "p_round", 'status': "p_status"},
                   {'depth': "depth",
                    'later': CASE WHEN "p_round" <= "round" THEN 0 ELSE 1 END,
                    'distance': abs("round" - "p_round"),
                    'task': "p_task", 'source_id': "p_source_id", 'line_no': "p_line_no"}) AS "parent"
    FROM candidates
    GROUP BY "run_id", "source_id", "line_no"
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
