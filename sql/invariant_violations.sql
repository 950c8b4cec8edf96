-- invariant_violations: one row per offending row and invariant (docs/metrics.md, "The
-- invariants" 1-9). Empty on clean data. The data-quality gate (`warehouse check`) reads the
-- cross-row checks (3, 7, 8) from this view and evaluates the row-level ones (1, 2, 4, 5, 6,
-- 9) as native Great Expectations expectations; tests/warehouse/quality proves both agree.
--
-- Grain: an offending row is a node (checks 1, 2, 4, 5, 6, 8, 9), a round summary (3) or a
-- timing row (7). A row that breaks one invariant in several ways appears once, with every
-- reason in `detail`.
--   round   : the node's / summary's round; for check 7 the timing row's step (= round)
--   task    : NULL for check 7
--   node_id : the node's id; for check 3 the summary's best_node_id when that part fails
--   detail  : what is wrong, then where: the file path and 1-based line (":0" = whole file)
-- Readings of docs/metrics.md: the "-0.2 exactly for idle kills" rule applies to nodes that are
-- not ok (an ok node's reward is in [0, 1] anyway); a run's lineage is the run and the runs
-- it resumed from, transitively (a parent never lives in a later run); a summary's
-- best_node_id is looked up in the same task across that lineage; "oriented = +/- test_metric"
-- also means one sign per task (its metric's direction), taken from the task's majority.
-- NULL semantics: a NULL status or source counts as "not ok" / "not grade"; a NULL mode is
-- "not draft"; a NULL reward, status or mode is a violation. Response caps come from the
-- run's arm, overridden by runs.overrides.response_cap; no cap means only the length
-- equality of invariant 4 is checked.
CREATE OR REPLACE VIEW "invariant_violations" AS
WITH
-- (run_id, ancestor): the run itself and every run it was resumed from, transitively
-- (run_lineage).
lineage AS (
    SELECT "run_id", "ancestor_run_id" AS "ancestor" FROM "run_lineage"
),
-- A task's metric direction, as most of its graded nodes across the warehouse show it:
-- 1 when oriented = test_metric, -1 when oriented = -test_metric, NULL on a tie.
task_signs AS (
    SELECT "task",
           CASE sign(count(*) FILTER (WHERE "oriented" = "test_metric")
                     - count(*) FILTER (WHERE "oriented" = -"test_metric"))
               WHEN 1 THEN 1 WHEN -1 THEN -1 END AS "task_sign"
    FROM "nodes"
    WHERE "test_metric" <> 0
    GROUP BY "task"
),
node_rows AS (
    -- the columns the checks read (a CTE read by every check is materialized: nodes' other
    -- columns, plan and term_tail texts among them, would be copied for nothing); every check
    -- on nodes reads them here, the summaries' best nodes included, so nodes is read once for
    -- them all (on DuckLake each read of a table costs its catalog queries)
    SELECT
        n."source_id", n."line_no", n."run_id", n."round", n."task", n."node_id", n."parent_id",
        n."mode", n."status", n."exc_type", n."reward", n."test_metric", n."oriented", n."source",
        n."n_response_tokens", n."n_response_logprobs", n."code_chars",
        c."response_cap",
        t."task_sign"
    FROM "nodes" AS n
    LEFT JOIN "run_caps" AS c ON c."run_id" = n."run_id"
    LEFT JOIN task_signs AS t ON t."task" = n."task"
),
node_reasons AS (
    -- every check names the node's keys as it reads them (no join back to node_rows)
    -- 1. rewards: [0, 1] when ok, else a sentinel; -0.2 exactly for idle kills.
    SELECT 1 AS "check_no", "source_id", "line_no", "run_id", "round", "task", "node_id",
           'reward is NULL' AS "reason"
    FROM node_rows WHERE "reward" IS NULL
    UNION ALL
    SELECT 1, "source_id", "line_no", "run_id", "round", "task", "node_id",
           'status ok but reward ' || "reward" || ' is outside [0, 1]'
    FROM node_rows WHERE "status" = 'ok' AND NOT ("reward" BETWEEN 0 AND 1)
    UNION ALL
    SELECT 1, "source_id", "line_no", "run_id", "round", "task", "node_id",
           'status ' || COALESCE("status", 'NULL') || ' but reward ' || "reward"
           || ' is not a sentinel (-0.5, -0.2, -1.0)'
    FROM node_rows
    WHERE "status" IS DISTINCT FROM 'ok' AND "reward" NOT IN (-0.5, -0.2, -1.0)
    UNION ALL
    SELECT 1, "source_id", "line_no", "run_id", "round", "task", "node_id",
           'exc_type ' || "exc_type" || ' (idle kill) but reward ' || "reward" || ', not -0.2'
    FROM node_rows
    WHERE "status" IS DISTINCT FROM 'ok'
      AND "exc_type" IN ('CpuIdleError', 'GpuIdleError') AND "reward" <> -0.2
    UNION ALL
    SELECT 1, "source_id", "line_no", "run_id", "round", "task", "node_id",
           'reward -0.2 but exc_type ' || COALESCE("exc_type", 'NULL') || ' is not an idle kill'
    FROM node_rows
    WHERE "status" IS DISTINCT FROM 'ok' AND "reward" = -0.2
      AND ("exc_type" IS NULL OR "exc_type" NOT IN ('CpuIdleError', 'GpuIdleError'))
    -- 2. known status and mode; draft exactly when parent_id is NULL.
    UNION ALL
    SELECT 2, "source_id", "line_no", "run_id", "round", "task", "node_id",
           'unknown status ' || COALESCE("status", 'NULL')
    FROM node_rows
    WHERE "status" IS NULL OR "status" NOT IN
        ('ok', 'crashed', 'timeout', 'no_code', 'no_submission', 'invalid_submission')
    UNION ALL
    SELECT 2, "source_id", "line_no", "run_id", "round", "task", "node_id",
           'unknown mode ' || COALESCE("mode", 'NULL')
    FROM node_rows
    WHERE "mode" IS NULL OR "mode" NOT IN ('draft', 'improve', 'debug')
    UNION ALL
    SELECT 2, "source_id", "line_no", "run_id", "round", "task", "node_id",
           'mode ' || COALESCE("mode", 'NULL') || ' with parent_id ' || COALESCE("parent_id", 'NULL')
           || ' (draft exactly when parent_id is NULL)'
    FROM node_rows
    WHERE COALESCE("mode" = 'draft', FALSE) <> ("parent_id" IS NULL)
    -- 4. token ids and logprobs of equal length, within the arm's response cap.
    UNION ALL
    SELECT 4, "source_id", "line_no", "run_id", "round", "task", "node_id",
           COALESCE(CAST("n_response_tokens" AS VARCHAR), 'NULL') || ' response token ids but '
           || COALESCE(CAST("n_response_logprobs" AS VARCHAR), 'NULL') || ' logprobs'
    FROM node_rows
    WHERE "n_response_tokens" IS DISTINCT FROM "n_response_logprobs"
    UNION ALL
    SELECT 4, "source_id", "line_no", "run_id", "round", "task", "node_id",
           "n_response_tokens" || ' response tokens exceed the arm''s cap ' || "response_cap"
    FROM node_rows
    WHERE "n_response_tokens" > "response_cap"
    -- 5. no_code means empty code.
    UNION ALL
    SELECT 5, "source_id", "line_no", "run_id", "round", "task", "node_id",
           'status no_code but code has ' || "code_chars" || ' chars'
    FROM node_rows
    WHERE "status" = 'no_code' AND COALESCE("code_chars", 0) <> 0
    -- 6. graded exactly when test_metric is set; oriented = +/- test_metric.
    UNION ALL
    SELECT 6, "source_id", "line_no", "run_id", "round", "task", "node_id",
           'source ' || COALESCE("source", 'NULL') || ' with test_metric '
           || COALESCE(CAST("test_metric" AS VARCHAR), 'NULL')
           || ' (source grade exactly when test_metric is set)'
    FROM node_rows
    WHERE COALESCE("source" = 'grade', FALSE) <> ("test_metric" IS NOT NULL)
    UNION ALL
    SELECT 6, "source_id", "line_no", "run_id", "round", "task", "node_id",
           'oriented ' || COALESCE(CAST("oriented" AS VARCHAR), 'NULL') || ' is not +/- test_metric '
           || COALESCE(CAST("test_metric" AS VARCHAR), 'NULL')
    FROM node_rows
    WHERE abs("oriented") IS DISTINCT FROM abs("test_metric")
    UNION ALL
    SELECT 6, "source_id", "line_no", "run_id", "round", "task", "node_id",
           'oriented ' || "oriented" || ' flips the sign the other graded nodes of task '
           || "task" || ' give test_metric ' || "test_metric"
    FROM node_rows
    WHERE abs("oriented") = abs("test_metric") AND "test_metric" <> 0
      AND "oriented" <> "task_sign" * "test_metric"
    -- 8. the parent is a node of the same run lineage (the run or a run it resumed from):
    -- looked up by (run, node id) in the child's own run first, in the runs it resumed from only
    -- for the children not found there (never by node id alone: 30 copies of one root under
    -- other run ids would match each child to 30 records)
    UNION ALL
    SELECT 8, n."source_id", n."line_no", n."run_id", n."round", n."task", n."node_id",
           'parent_id ' || n."parent_id" || ' names no node of run ' || n."run_id" || ' or its ancestors'
    FROM node_rows AS n
    ANTI JOIN node_rows AS p ON p."run_id" = n."run_id" AND p."node_id" = n."parent_id"
    WHERE n."parent_id" IS NOT NULL
      AND NOT EXISTS (
          SELECT 1
          FROM lineage AS l
          JOIN node_rows AS p ON p."run_id" = l."ancestor" AND p."node_id" = n."parent_id"
          WHERE l."run_id" = n."run_id"
      )
    -- 9. node ids unique within a run: every copy of a repeated id is offending.
    UNION ALL
    SELECT 9, n."source_id", n."line_no", n."run_id", n."round", n."task", n."node_id",
           'node id ' || n."node_id" || ' appears ' || d."copies" || ' times in run ' || n."run_id"
    FROM node_rows AS n
    JOIN (
        SELECT "run_id", "node_id", count(*) AS "copies"
        FROM node_rows
        GROUP BY "run_id", "node_id"
        HAVING count(*) > 1
    ) AS d ON d."run_id" = n."run_id" AND d."node_id" = n."node_id"
),
node_violations AS (
    SELECT
        r."check_no", r."run_id", r."round", r."task", r."node_id",
        string_agg(r."reason", '; ' ORDER BY r."reason") || ' at '
          || COALESCE(any_value(s."path"), 'source ' || r."source_id") || ':' || r."line_no" AS "detail"
    FROM node_reasons AS r
    LEFT JOIN "sources" AS s ON s."source_id" = r."source_id"
    GROUP BY r."check_no", r."source_id", r."line_no", r."run_id", r."round", r."task", r."node_id"
),
-- 3. summaries agree with a recount of their task-round's nodes.
recount AS (
    SELECT "run_id", "round", "task", count(*) AS "nodes",
           count(*) FILTER (WHERE "status" = 'ok') AS "valid"
    FROM "nodes"
    GROUP BY "run_id", "round", "task"
),
-- the best node: same task in the run's lineage; any copy with a matching metric counts
best_nodes AS (
    SELECT t."run_id", t."round", t."task",
           count(*) AS "best_found",
           count(*) FILTER (WHERE b."test_metric" IS NULL AND t."best_test_metric" IS NULL
                            OR abs(b."test_metric" - t."best_test_metric")
                               <= 1e-9 * greatest(1.0, abs(t."best_test_metric"))) AS "best_matches",
           min(b."test_metric") AS "best_node_metric"
    FROM "task_rounds" AS t
    JOIN lineage AS l ON l."run_id" = t."run_id"
    JOIN node_rows AS b ON b."run_id" = l."ancestor" AND b."node_id" = t."best_node_id"
                       AND b."task" = t."task"
    WHERE t."summary_present"
    GROUP BY t."run_id", t."round", t."task"
),
summaries AS (
    SELECT
        t.*,
        COALESCE(c."nodes", 0) AS "recount_nodes",
        COALESCE(c."valid", 0) AS "recount_valid",
        COALESCE(s."path", 'source ' || t."summary_source_id") || ':0' AS "at",
        COALESCE(b."best_found", 0) AS "best_found",
        COALESCE(b."best_matches", 0) AS "best_matches",
        b."best_node_metric"
    FROM "task_rounds" AS t
    LEFT JOIN recount AS c USING ("run_id", "round", "task")
    LEFT JOIN best_nodes AS b USING ("run_id", "round", "task")
    LEFT JOIN "sources" AS s ON s."source_id" = t."summary_source_id"
    WHERE t."summary_present"
),
summary_reasons AS (
    SELECT "run_id", "round", "task", NULL AS "node_id", "at",
           'summary.nodes ' || COALESCE(CAST("nodes" AS VARCHAR), 'NULL')
           || ' but ' || "recount_nodes" || ' node records' AS "reason"
    FROM summaries WHERE "nodes" IS DISTINCT FROM "recount_nodes"
    UNION ALL
    SELECT "run_id", "round", "task", NULL, "at",
           'summary.valid ' || COALESCE(CAST("valid" AS VARCHAR), 'NULL')
           || ' but ' || "recount_valid" || ' ok node records'
    FROM summaries WHERE "valid" IS DISTINCT FROM "recount_valid"
    UNION ALL
    SELECT "run_id", "round", "task", "best_node_id", "at",
           'summary.best_test_metric ' || "best_test_metric" || ' but best_node_id is NULL'
    FROM summaries WHERE "best_node_id" IS NULL AND "best_test_metric" IS NOT NULL
    UNION ALL
    SELECT "run_id", "round", "task", "best_node_id", "at",
           'best_node_id ' || "best_node_id" || ' names no node of this task in the run''s lineage'
    FROM summaries WHERE "best_node_id" IS NOT NULL AND "best_found" = 0
    UNION ALL
    SELECT "run_id", "round", "task", "best_node_id", "at",
           'summary.best_test_metric ' || COALESCE(CAST("best_test_metric" AS VARCHAR), 'NULL')
           || ' but node ' || "best_node_id" || ' has test_metric '
           || COALESCE(CAST("best_node_metric" AS VARCHAR), 'NULL')
    FROM summaries WHERE "best_found" > 0 AND "best_matches" = 0
),
summary_violations AS (
    SELECT 3 AS "check_no", "run_id", "round", "task",
           max("node_id") AS "node_id",
           string_agg("reason", '; ' ORDER BY "reason") || ' at ' || any_value("at") AS "detail"
    FROM summary_reasons
    GROUP BY "run_id", "round", "task"
),
-- 7. timing rows: steps strictly increasing in file order; phases sum to total_s.
timing AS (
    SELECT
        t.*,
        lag(t."step") OVER (PARTITION BY t."source_id" ORDER BY t."line_no") AS "prev_step",
        abs(COALESCE(t."update_weights_s", 0) + COALESCE(t."gen_s", 0)
            + COALESCE(t."old_log_prob_s", 0) + COALESCE(t."ref_s", 0) + COALESCE(t."adv_s", 0)
            + COALESCE(t."update_actor_s", 0) + COALESCE(t."save_checkpoint_s", 0)
            - t."total_s") AS "phase_sum_gap",
        COALESCE(s."path", 'source ' || t."source_id") || ':' || t."line_no" AS "at"
    FROM "steps" AS t
    LEFT JOIN "sources" AS s ON s."source_id" = t."source_id"
),
timing_reasons AS (
    SELECT "source_id", "line_no", 'step ' || "step" || ' does not follow step ' || "prev_step"
           || ' (steps must strictly increase)' AS "reason"
    FROM timing WHERE "step" <= "prev_step"
    UNION ALL
    SELECT "source_id", "line_no", 'phase_sum_gap ' || round("phase_sum_gap", 3)
           || ' s exceeds max(1 s, 1% of total_s ' || "total_s" || ')'
    FROM timing WHERE "phase_sum_gap" > greatest(1.0, 0.01 * "total_s")
),
timing_violations AS (
    SELECT 7 AS "check_no", t."run_id", t."step" AS "round", NULL AS "task", NULL AS "node_id",
           string_agg(r."reason", '; ' ORDER BY r."reason") || ' at ' || any_value(t."at") AS "detail"
    FROM timing_reasons AS r
    JOIN timing AS t USING ("source_id", "line_no")
    GROUP BY r."source_id", r."line_no", t."run_id", t."step"
)
SELECT "check_no", "run_id", "round", "task", "node_id", "detail" FROM node_violations
UNION ALL
SELECT "check_no", "run_id", "round", CAST("task" AS VARCHAR), CAST("node_id" AS VARCHAR), "detail"
FROM summary_violations
UNION ALL
SELECT "check_no", "run_id", "round", CAST("task" AS VARCHAR), CAST("node_id" AS VARCHAR), "detail"
FROM timing_violations
