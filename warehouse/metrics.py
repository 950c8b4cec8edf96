"""The report metrics: read the views of `sql/` (docs/metrics.md names them), filtered by run and task.

The views are the definitions; this module only selects from them with bound parameters, in
each view's key order, so the CLI, notebooks and the report read the same numbers.
"""
from __future__ import annotations

from warehouse.errors import TerminalError
from warehouse.query import Result

#: The report views and their keys (the ORDER BY of `metrics`), as docs/metrics.md lists them.
VIEW_KEYS: dict[str, tuple[str, ...]] = {
    "task_round_metrics": ("run_id", "round", "task"),
    "round_metrics": ("run_id", "round"),
    "round_task_means": ("run_id", "round"),
    "run_metrics": ("run_id",),
    "run_status_counts": ("run_id", "status"),
    "decision_rule": ("run_id", "task", "k"),
    "invariant_violations": ("check_no", "run_id", "round", "task", "node_id"),
    "logprob_mismatch": ("run_id", "round", "task"),
    # reward-model runs (data root 004; docs/reward_model.md)
    "rm_best_final": ("run_id",),
    "rm_proxy_vs_final": ("run_id", "job", "progress"),
    "rm_exploration_vs_formal": ("run_id", "exploration_evaluation_id", "formal_evaluation_id"),
    "rm_scores_by_progress": ("run_id", "job", "split", "progress"),
    "rm_section_deltas": ("run_id", "section", "from_evaluation_id", "to_evaluation_id"),
    "rm_budget_use": ("run_id", "phase"),
    "rm_job_summary": ("run_id", "job"),
    "rm_violations": ("check_no", "run_id", "job", "item"),
}
DEFAULT_VIEW = "task_round_metrics"


def metrics(url: str, view: str = DEFAULT_VIEW, run: str | None = None,
            task: str | None = None) -> Result:
    """Rows of one report view, optionally for one run and/or one task, in key order."""
    from warehouse.db import connect, quote_identifier
    from warehouse.revision import require_head

    keys = _view_keys(view)
    with connect(url, read_only=True) as con:
        require_head(con, url)
        columns = _view_columns(con, view)
        where, params = _filters(view, columns, run, task)
        order = ", ".join(f"{quote_identifier(k)} NULLS LAST" for k in keys if k in columns)
        sql = f"SELECT * FROM {quote_identifier(view)}{where}" + (f" ORDER BY {order}" if order else "")
        cur = con.execute(sql, params)
        result = Result([d[0] for d in cur.description], cur.fetchall(), [str(d[1]) for d in cur.description])
        if run is not None and not result.rows:
            _require_run(con, run)
        return result


def _require_run(con, run: str) -> None:
    """An empty answer for a run the warehouse does not have is an error, as in check and report."""
    known = con.execute('SELECT count(*) FROM (SELECT "run_id" FROM "runs" UNION ALL '
                        'SELECT "run_id" FROM "rm_runs") WHERE "run_id" = ?', [run]).fetchone()[0]
    if not known:
        raise TerminalError(f"no run {run!r} in the warehouse. List runs with "
                            "'warehouse metrics --view run_metrics'.")


def _view_keys(view: str) -> tuple[str, ...]:
    if view not in VIEW_KEYS:
        raise TerminalError(f"unknown view {view!r}; choose one of: {', '.join(VIEW_KEYS)}")
    return VIEW_KEYS[view]


def _view_columns(con, view: str) -> list[str]:
    rows = con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index",
        [view],
    ).fetchall()
    if not rows:
        raise TerminalError(
            f"view {view!r} is not in this warehouse (sql/{view}.sql not applied yet). "
            "Run 'warehouse upgrade'."
        )
    return [r[0] for r in rows]


def _filters(view: str, columns: list[str], run: str | None, task: str | None):
    clauses, params = [], []
    for name, value in (("run_id", run), ("task", task)):
        if value is None:
            continue
        if name not in columns:
            having = [v for v, keys in VIEW_KEYS.items() if name in keys]
            raise TerminalError(
                f"view {view!r} has no {name} column; use --view with one of: {', '.join(having)}"
            )
        clauses.append(f'"{name}" = ?')
        params.append(value)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params
