"""The lean DataFrames the suites validate, produced by DuckDB.

Only the columns the expectations read leave DuckDB: identity, status fields, rewards,
metrics and the payload *lengths* kept on `nodes`. `node_payloads` (token ids, logprobs,
prompts) is never read, so the gate's cost scales with the node count, not the bytes.
"""
from __future__ import annotations

from warehouse.quality.invariants import CROSS_ROW_CHECKS, RM_CROSS_ROW_CHECKS

#: Columns every frame carries to name an offending row (the report's examples).
KEY_COLUMNS = ["run_id", "round", "task", "node_id"]

# The response cap and the task's sign as invariant_violations computes them (the run's arm
# unless the run's overrides set response_cap; the sign most of the task's graded nodes
# use, over all runs even when one run is checked). Kept identical to
# sql/invariant_violations.sql: a test checks the view and the expectations flag the same rows.
_NODES_SQL = """
SELECT
    n."run_id", n."round", n."task", n."node_id",
    n."status", n."mode", n."parent_id", n."reward", n."exc_type",
    n."source", n."test_metric", n."oriented",
    abs(n."oriented") AS "oriented_abs",
    abs(n."test_metric") AS "test_metric_abs",
    -- what oriented must be when it is +/- test_metric: the task's majority sign applied
    -- (NULL, so not checked, on a tie or when |oriented| <> |test_metric| anyway)
    CASE WHEN abs(n."oriented") = abs(n."test_metric") AND n."test_metric" <> 0
         THEN t."task_sign" * n."test_metric" END AS "oriented_by_task",
    n."n_response_tokens", n."n_response_logprobs", n."code_chars",
    COALESCE(TRY_CAST(json_extract_string(r."overrides", '$.response_cap') AS INTEGER),
             a."response_cap") AS "response_cap"
FROM "nodes" AS n
LEFT JOIN "runs" AS r ON r."run_id" = n."run_id"
LEFT JOIN "arms" AS a ON a."name" = r."arm"
LEFT JOIN (
    SELECT "task",
           CASE sign(count(*) FILTER (WHERE "oriented" = "test_metric")
                     - count(*) FILTER (WHERE "oriented" = -"test_metric"))
               WHEN 1 THEN 1 WHEN -1 THEN -1 END AS "task_sign"
    FROM "nodes" WHERE "test_metric" <> 0 GROUP BY "task"
) AS t ON t."task" = n."task"
WHERE ? IS NULL OR n."run_id" = ?
ORDER BY n."run_id", n."round", n."task", n."source_id", n."line_no"
"""

_VIOLATIONS_SQL = """
SELECT "check_no", "run_id", "round", "task", "node_id", "detail"
FROM "invariant_violations"
WHERE list_contains(?, "check_no") AND (? IS NULL OR "run_id" = ?)
ORDER BY "check_no", "run_id", "round", "task", "node_id", "detail"
"""


def nodes_frame(con, run: str | None = None):
    """One row per node record, with the run's response cap (NULL when unknown)."""
    return _frame(con, _NODES_SQL, [run, run])


def violations_frame(con, run: str | None = None, checks=CROSS_ROW_CHECKS):
    """The rows of `invariant_violations` for the cross-row checks."""
    return _frame(con, _VIOLATIONS_SQL, [list(checks), run, run])


def same_database_cursor(con):
    """A cursor reading the database `con` reads (DuckLake's is attached, not the default)."""
    database = con.execute("SELECT current_database()").fetchone()[0]
    cursor = con.cursor()
    cursor.execute(f'USE "{database}"')
    return cursor


def _frame(con, sql: str, params: list):
    # Through Arrow: the same dtypes as `.df()`, about twice as fast on a million rows. A
    # cursor of its own, as DuckDB 2 refuses a relation on a connection with an unfinished
    # result (require_head's, say).
    cursor = same_database_cursor(con)
    try:
        return cursor.sql(sql, params=params).to_arrow_table().to_pandas()
    finally:
        cursor.close()


# Reward-model frames name an offending row with the same key columns: round is NULL,
# task is the job (or the evaluation, for a section) and node_id the evaluation id (or
# the section). The receipt match and the binomial SE are computed as sql/rm_violations.sql
# computes them.
_RM_EVALUATIONS_SQL = """
SELECT
    e."run_id", CAST(NULL AS INTEGER) AS "round", e."job" AS "task",
    e."evaluation_id" AS "node_id",
    e."phase", e."split", e."score", e."n", e."se", e."official",
    coalesce(e."receipt_sha256" = e."summary_sha256"
             AND e."receipt_size" = e."summary_size", false) AS "receipt_matches",
    e."phase" = 'formal' AND e."split" = 'full' AS "is_final",
    -- SE / binomial SE; at a score of 0 or 100 the binomial SE is 0, so only an SE of 0
    -- is consistent there (ratio 1), any other is off the scale (1e9)
    CASE WHEN e."score" BETWEEN 0 AND 100 AND e."n" > 0 THEN
        CASE WHEN e."score" IN (0, 100) THEN CASE WHEN e."se" <= 1e-9 THEN 1.0 ELSE 1e9 END
             ELSE e."se" / (100 * sqrt((e."score" / 100) * (1 - e."score" / 100) / e."n"))
        END
    END AS "se_ratio"
FROM "rm_evaluations" AS e
WHERE ? IS NULL OR e."run_id" = ?
ORDER BY e."run_id", e."evaluation_id"
"""

_RM_SECTIONS_SQL = """
SELECT s."run_id", CAST(NULL AS INTEGER) AS "round", s."evaluation_id" AS "task",
       s."section" AS "node_id", s."score"
FROM "rm_eval_sections" AS s
WHERE ? IS NULL OR s."run_id" = ?
ORDER BY s."run_id", s."evaluation_id", s."section"
"""

_RM_VIOLATIONS_SQL = """
SELECT "check_no", "run_id", CAST(NULL AS INTEGER) AS "round", "job" AS "task",
       "item" AS "node_id", "detail"
FROM "rm_violations"
WHERE list_contains(?, "check_no") AND (? IS NULL OR "run_id" = ?)
ORDER BY "check_no", "run_id", "job", "item", "detail"
"""


def mismatch_frame(con, run: str | None = None):
    """One row per trained task-round: its logprob_mismatch figures and the run's limits."""
    from warehouse.quality.mismatch import MISMATCH_SQL, params

    return _frame(con, MISMATCH_SQL, params(run))


def rm_evaluations_frame(con, run: str | None = None):
    """One row per reward-model evaluation, with its receipt match and SE ratio."""
    return _frame(con, _RM_EVALUATIONS_SQL, [run, run])


def rm_sections_frame(con, run: str | None = None):
    """One row per section score of a reward-model evaluation."""
    return _frame(con, _RM_SECTIONS_SQL, [run, run])


def rm_violations_frame(con, run: str | None = None, checks=RM_CROSS_ROW_CHECKS):
    """The rows of `rm_violations` for the cross-row reward-model checks."""
    return _frame(con, _RM_VIOLATIONS_SQL, [list(checks), run, run])


FRAMES = {"nodes": nodes_frame, "violations": violations_frame, "mismatch": mismatch_frame,
          "rm_evaluations": rm_evaluations_frame, "rm_sections": rm_sections_frame,
          "rm_violations": rm_violations_frame}
