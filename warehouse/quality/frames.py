"""The lean DataFrames the suites validate, produced by DuckDB.

Only the columns the expectations read leave DuckDB: identity, status fields, rewards,
metrics and the payload *lengths* kept on `nodes`. `node_payloads` (token ids, logprobs,
prompts) is never read, so the gate's cost scales with the node count, not the bytes.
"""
from __future__ import annotations

from warehouse.quality.invariants import CROSS_ROW_CHECKS

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


FRAMES = {"nodes": nodes_frame, "violations": violations_frame}
