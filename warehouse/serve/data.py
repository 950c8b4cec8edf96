"""What the dashboard's pages show, read from the views on one short read-only connection each.

Every function opens its own connection and closes it before returning (on DuckLake: borrows
a cursor of the one attached lake and hands it back), so the file lock is held for milliseconds and `train run` (which opens its write connection only to commit a
round) is never kept out. When a writer holds the file, `warehouse.db.connect` retries for
`BUSY_WAIT_S`, then raises DatabaseLockedError: the page says "busy" and tries again.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from warehouse.errors import TerminalError
from warehouse.report import RunData, read_run, rows

BUSY_WAIT_S = 3.0

#: The per-round metrics the compare page plots, with the task_round_metrics column each
#: comes from (a run's value for a round is the mean over its tasks, or the chosen task's).
COMPARE_METRICS = ("valid_reward_mean", "valid_rate", "reward_best", "mean_response_tokens",
                   "resp_clip_rate")
#: The step metrics of the run page (step_metrics columns).
STEP_METRICS = ("loss", "kl", "entropy", "lr", "clip_frac")


class NotFoundError(TerminalError):
    """A page asked for a run or node that is not in the warehouse."""


@contextlib.contextmanager
def reading(url: str):
    """A read-only connection at the newest schema: on the file a fresh one, closed on exit
    (so a writer gets the lock between requests); on DuckLake a cursor of the shared attached
    lake (`warehouse.serve.lake`), handed back on exit."""
    from warehouse.config import is_ducklake
    from warehouse.db import connect
    from warehouse.revision import require_head

    if is_ducklake(url):
        from warehouse.serve.lake import pool

        opened = pool(url).cursor()
    else:
        opened = connect(url, read_only=True, wait_s=BUSY_WAIT_S)
    with opened as con:
        require_head(con, url)
        yield con


# --- runs ----------------------------------------------------------------------------------

RUNS_SQL = '''
SELECT m."run_id", r."kind", r."arm", r."question_id",
       r."resumed_from_run", r."resumed_from_step",
       m."rounds", m."steps_logged" AS "steps", m."nodes",
       (SELECT max(s."ingested_at") FROM "sources" AS s WHERE s."run_id" = m."run_id") AS "last_update"
FROM "run_metrics" AS m
LEFT JOIN "runs" AS r USING ("run_id")
WHERE (CAST(? AS VARCHAR) IS NULL OR r."question_id" = ?)
  AND (CAST(? AS VARCHAR) IS NULL OR r."arm" = ?)
  AND (CAST(? AS VARCHAR) IS NULL OR r."kind" = ?)
ORDER BY "last_update" DESC NULLS LAST, m."run_id"
'''


@dataclass
class RunsPage:
    runs: list[dict]
    statuses: list[str]              # every status seen, the status-count columns
    choices: dict[str, list[str]]    # filter -> its values (question, arm, kind)
    filters: dict[str, str | None] = field(default_factory=dict)


def runs_page(url: str, question: str | None = None, arm: str | None = None,
              kind: str | None = None) -> RunsPage:
    """Every run (filtered), with lineage, rounds, steps, status counts and last update."""
    with reading(url) as con:
        runs = rows(con, RUNS_SQL, question, question, arm, arm, kind, kind)
        counts = rows(con, 'SELECT "run_id", coalesce("status", \'NULL\') AS "status", "n" '
                           'FROM "run_status_counts"')
        choices = {name: [r[0] for r in con.execute(
            f'SELECT DISTINCT "{column}" FROM "runs" WHERE "{column}" IS NOT NULL ORDER BY 1').fetchall()]
            for name, column in (("question", "question_id"), ("arm", "arm"), ("kind", "kind"))}
    by_run: dict[str, dict] = {}
    for c in counts:
        by_run.setdefault(c["run_id"], {})[c["status"]] = c["n"]
    statuses = sorted({c["status"] for c in counts}, key=lambda s: (s != "ok", s))
    for run in runs:
        run["status_counts"] = by_run.get(run["run_id"], {})
    return RunsPage(runs, statuses, choices, {"question": question, "arm": arm, "kind": kind})


# --- one run -------------------------------------------------------------------------------

@dataclass
class RunPage:
    data: RunData
    steps: list[dict]      # step_metrics rows
    version: str           # changes whenever a round, step or timing row lands


def run_page(url: str, run_id: str) -> RunPage:
    with reading(url) as con:
        try:
            data = read_run(con, run_id)
        except TerminalError as exc:
            raise NotFoundError(str(exc)) from None
        steps = rows(con, 'SELECT * FROM "step_metrics" WHERE "run_id" = ? ORDER BY "step"', run_id)
        version = _run_version(con, run_id)
    return RunPage(data, steps, version)


def run_version(url: str, run_id: str) -> str:
    """A cheap fingerprint of the run's rows: the live page reloads when it changes."""
    with reading(url) as con:
        _require_run(con, run_id)
        return _run_version(con, run_id)


def _require_run(con, run_id: str) -> None:
    known = con.execute('SELECT count(*) FROM (SELECT "run_id" FROM "runs" UNION ALL '
                        'SELECT "run_id" FROM "rm_runs") WHERE "run_id" = ?', [run_id]).fetchone()[0]
    if not known:
        raise NotFoundError(f"no run {run_id!r} in the warehouse")


def _run_version(con, run_id: str) -> str:
    row = con.execute(
        'SELECT (SELECT count(*) FROM "nodes" WHERE "run_id" = ?), '
        '(SELECT max("round") FROM "nodes" WHERE "run_id" = ?), '
        '(SELECT count(*) FROM "steps" WHERE "run_id" = ?), '
        '(SELECT count(*) FROM "step_metrics" WHERE "run_id" = ?), '
        '(SELECT count(*) FROM "task_rounds" WHERE "run_id" = ?)', [run_id] * 5).fetchone()
    return "-".join("" if v is None else str(v) for v in row)


# --- compare -------------------------------------------------------------------------------

@dataclass
class Series:
    run_id: str
    arm: str | None
    rounds: list[int]
    values: dict[str, list]          # metric -> one value per round (None where missing)
    reading: dict | None = None      # decision rule at step k: moved, tasks, k


@dataclass
class ComparePage:
    series: list[Series]
    k: int | None
    task: str | None
    choices: dict[str, list[str]]    # runs, arms, tasks to pick from
    picked_runs: list[str]
    picked_arms: list[str]


def compare_page(url: str, runs: list[str], arms: list[str], task: str | None = None,
                 k: int | None = None) -> ComparePage:
    """Per-round metrics of the picked runs (and every run of the picked arms) on one x axis,
    and the decision rule's reading at step k (default: the last step all of them reached;
    when they share none, each run's own last round)."""
    with reading(url) as con:
        choices = {"runs": [r[0] for r in con.execute(
                       'SELECT "run_id" FROM "run_metrics" ORDER BY "run_id"').fetchall()],
                   "arms": [r[0] for r in con.execute(
                       'SELECT DISTINCT "arm" FROM "runs" WHERE "arm" IS NOT NULL ORDER BY 1').fetchall()],
                   "tasks": [r[0] for r in con.execute(
                       'SELECT DISTINCT "task" FROM "task_round_metrics" ORDER BY 1').fetchall()]}
        picked = _picked_runs(con, runs, arms)
        series = [_series(con, run_id, arm, task) for run_id, arm in picked]
        k = k if k is not None else _shared_last_round(series)
        for s in series:
            at = k if k is not None else (max(s.rounds) if s.rounds else None)
            s.reading = _reading(con, s.run_id, at, task) if at is not None else None
    return ComparePage(series, k, task, choices, runs, arms)


def _picked_runs(con, runs: list[str], arms: list[str]) -> list[tuple[str, str | None]]:
    known = dict(con.execute('SELECT m."run_id", r."arm" FROM "run_metrics" AS m '
                             'LEFT JOIN "runs" AS r USING ("run_id")').fetchall())
    missing = [r for r in runs if r not in known]
    if missing:
        raise NotFoundError(f"no run {', '.join(map(repr, missing))} in the warehouse")
    picked = list(dict.fromkeys(runs + [r for r, a in sorted(known.items()) if a in arms]))
    return [(r, known[r]) for r in picked]


def _series(con, run_id: str, arm: str | None, task: str | None) -> Series:
    columns = ", ".join(f'avg("{m}") AS "{m}"' for m in COMPARE_METRICS)
    found = rows(con, f'SELECT "round", {columns} FROM "task_round_metrics" WHERE "run_id" = ? '
                      'AND (CAST(? AS VARCHAR) IS NULL OR "task" = ?) GROUP BY "round" ORDER BY "round"',
                 run_id, task, task)
    return Series(run_id, arm, [r["round"] for r in found],
                  {m: [r[m] for r in found] for m in COMPARE_METRICS})


def _shared_last_round(series: list[Series]) -> int | None:
    shared = set.intersection(*(set(s.rounds) for s in series)) if series else set()
    return max(shared) if shared else None


def _reading(con, run_id: str, k: int, task: str | None) -> dict:
    row = con.execute(
        'SELECT count(*) FILTER (WHERE "moved"), count("delta"), count(*) FROM "decision_rule" '
        'WHERE "run_id" = ? AND "k" = ? AND (CAST(? AS VARCHAR) IS NULL OR "task" = ?)',
        [run_id, k, task, task]).fetchone()
    return {"k": k, "moved": row[0], "measured": row[1], "tasks": row[2]}


# --- quality and nodes ---------------------------------------------------------------------

def violations(url: str) -> list[dict]:
    with reading(url) as con:
        return rows(con, 'SELECT * FROM "invariant_violations" ORDER BY "check_no", "run_id", '
                         '"round", "task", "node_id"')


NODE_SQL = '''
SELECT n."run_id", n."round", n."task", n."node_id", n."mode", n."status", n."reward",
       n."parent_id", n."sibling_group", n."exc_type", n."exec_time", n."test_metric",
       n."n_response_tokens", n."plan", n."term_tail",
       p."code", p."prompt_messages", p."raw_completion", p."thinking"
FROM "nodes" AS n
LEFT JOIN "node_payloads" AS p USING ("source_id", "line_no")
WHERE n."run_id" = ? AND n."node_id" = ?
  AND (CAST(? AS INTEGER) IS NULL OR n."round" = ?)
ORDER BY n."round", n."source_id", n."line_no"
LIMIT 1
'''


def node(url: str, run_id: str, node_id: str, round_no: int | None = None) -> dict:
    """One node with its payload (plan, code, term_tail, the prompt messages)."""
    import json

    with reading(url) as con:
        found = rows(con, NODE_SQL, run_id, node_id, round_no, round_no)
    if not found:
        raise NotFoundError(f"no node {node_id!r} in run {run_id!r}")
    record = found[0]
    messages = record["prompt_messages"]
    record["prompt_messages"] = json.loads(messages) if isinstance(messages, str) else messages
    return record


# --- reward-model runs ----------------------------------------------------------------------

@dataclass
class RmPage:
    data: object               # warehouse.rm_report.RmRunData
    proxy_vs_final: list[dict]  # rm_proxy_vs_final rows


def is_reward_model_run(url: str, run_id: str) -> bool:
    from warehouse.rm_report import is_reward_model_run as is_rm

    with reading(url) as con:
        return is_rm(con, run_id)


def rm_page(url: str, run_id: str) -> RmPage:
    """A reward-model run: the static report's data (rm_report) plus its proxy/final pairs."""
    from warehouse.rm_report import read_rm_run

    with reading(url) as con:
        data = read_rm_run(con, run_id)
        pairs = rows(con, 'SELECT * FROM "rm_proxy_vs_final" WHERE "run_id" = ? ORDER BY "job", "progress"', run_id)
    return RmPage(data, pairs)
