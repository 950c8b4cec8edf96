-- node_parents: one row per node record that has a parent_id, with the parent it names.
--
-- The parent is looked up by node id in the child's run lineage (run_lineage): first in the
-- child's own run, then in the run it resumed from, and so on back to the root, because a
-- resumed run continues the tree of the run it resumed from. When the id matches several
-- records (duplicate ids), the nearest run wins, then the copy from the latest round not
-- after the child's round, then the smallest (task, source line). A parent_id that names no
-- record of the lineage gives parent_found = FALSE and a NULL parent_status.
--
-- Most children name an id that one record of their own run carries: that record is the
-- parent (the nearest there can be), read from `ids`, one grouping of nodes by (run, node id).
-- Only the others (an id carried by several records of the run, or by none: a resumed run's
-- child whose parent lives in an earlier run) go through the lineage and the ordered pick, a
-- grouped arg_min over the child's key (the sort key (depth, later, distance, task, source_id,
-- line_no) is unique per candidate, so the pick is the same as any ordering's). A filter on
-- run_id (one run's page) reaches the reads of nodes: `linked`, read twice, is materialized
-- (DuckDB's default for a CTE read more than once; a view stored in a DuckDB file keeps no
-- MATERIALIZED hint, so none is written) with the filter applied above its read, and the ids'
-- read takes it through the join on run_id. Records are joined by (run, node id), never by
-- node id alone (a warehouse of 30 copies of one root under other run ids matched each child to
-- 30 records first).
CREATE OR REPLACE VIEW "node_parents" AS
WITH
ids AS (
    -- every (run, node id): how many records carry it, and the record's round and status
    SELECT "run_id", "node_id", count(*) AS "copies",
           any_value("round") AS "round", any_value("status") AS "status"
    FROM "nodes"
    GROUP BY "run_id", "node_id"
),
linked AS (
    SELECT c."source_id", c."line_no", c."run_id", c."round", c."task", c."node_id", c."mode",
           c."status", c."parent_id",
           i."copies", i."round" AS "own_round", i."status" AS "own_status"
    FROM "nodes" AS c
    LEFT JOIN ids AS i ON i."run_id" = c."run_id" AND i."node_id" = c."parent_id"
    WHERE c."parent_id" IS NOT NULL
),
candidates AS (
    -- the records that may be the parent of a child whose id is not carried by exactly one
    -- record of its own run: the lineage's (depth 0 = its own run)
    SELECT c."run_id", c."source_id", c."line_no", c."round", l."depth", p."run_id" AS "p_run_id",
           p."round" AS "p_round", p."status" AS "p_status", p."task" AS "p_task",
           p."source_id" AS "p_source_id", p."line_no" AS "p_line_no"
    FROM linked AS c
    JOIN "run_lineage" AS l ON l."run_id" = c."run_id"
    JOIN "nodes" AS p ON p."run_id" = l."ancestor_run_id" AND p."node_id" = c."parent_id"
    WHERE c."copies" IS DISTINCT FROM 1
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
    c."copies" IS NOT DISTINCT FROM 1 OR p."parent" IS NOT NULL AS "parent_found",
    CASE WHEN c."copies" = 1 THEN c."run_id" ELSE p."parent"."run_id" END AS "parent_run_id",
    CASE WHEN c."copies" = 1 THEN c."own_round" ELSE p."parent"."round" END AS "parent_round",
    CASE WHEN c."copies" = 1 THEN c."own_status" ELSE p."parent"."status" END AS "parent_status"
FROM linked AS c
LEFT JOIN nearest AS p
       ON p."run_id" = c."run_id" AND p."source_id" = c."source_id" AND p."line_no" = c."line_no";
