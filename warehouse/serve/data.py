"""What the dashboard's pages show, read from the views on one short read-only connection each.

Every function opens its own connection and closes it before returning (on DuckLake: borrows
a cursor of the one attached lake and hands it back), so the file lock is held for milliseconds and `train run` (which opens its write connection only to commit a
round) is never kept out. When a writer holds the file, `warehouse.db.connect` retries for
`BUSY_WAIT_S`, then raises DatabaseLockedError: the page says "busy" and tries again.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from warehouse import vocabulary as vocab
from warehouse.errors import TerminalError
from warehouse.report import RunData, read_run, rows, run_metrics_row
from warehouse.run_state import read_life, read_run_row
from warehouse.serve.params import INT32, INT64, BadRequestError, query_int  # noqa: F401 (the pages read them here)

BUSY_WAIT_S = 3.0

#: The per-round metrics the compare page plots: columns of task_round_metrics and of the view
#: round_task_means (a run's value for a round is the mean over its tasks, or the chosen task's).
COMPARE_METRICS = ("valid_reward_mean", "valid_rate", "reward_best", "mean_response_tokens",
                   "resp_clip_rate")
#: The step metrics of the run page (step_metrics columns).
STEP_METRICS = ("loss", "kl", "entropy", "lr", "clip_frac", "grad_norm")
#: step_metrics column -> the W&B history keys (verl's names) that stand for it on a run
#: that has no step_metrics rows but an imported W&B history
WANDB_KEYS = {"loss": ("actor/pg_loss", "loss"), "kl": ("actor/kl_loss", "kl"),
              "entropy": ("actor/entropy_loss", "actor/entropy", "entropy"), "lr": ("actor/lr", "lr"),
              "clip_frac": ("actor/pg_clipfrac", "clip_frac"), "grad_norm": ("actor/grad_norm", "grad_norm")}


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
SELECT m.*, m."steps_logged" AS "steps", st."exit_reason", st."started_at", st."last_activity_from"{windows}
FROM "run_metrics" AS m
LEFT JOIN "run_state" AS st USING ("run_id")
WHERE {where}
ORDER BY {order}coalesce(m."last_activity_at", st."started_at") DESC NULLS LAST, m."run_id"
'''
#: the runs page's filters: query parameter -> run_metrics column
FILTERS = {"question": "question_id", "arm": "arm", "kind": "kind", "state": "state"}
#: what the runs can be grouped by: query parameter -> run_metrics column
GROUPS = {"question": "question_id", "arm": "arm", "model": "model", "task_set": "task_set"}
#: the metric columns of the runs table (run_metrics), the ones a group row gives mean and best of
RUN_METRICS = ("valid_reward_mean_latest", "valid_reward_mean_best", "valid_rate", "reward_best", "loss_latest")
#: where a lower value is the better one (a group's best is its minimum)
LOWER_IS_BETTER = frozenset({"loss_latest"})
#: the run_metrics columns the runs table shows anyway (a pick of one of them adds nothing)
SHOWN_COLUMNS = frozenset({"run_id", "state", "kind", "arm", "question_id", "model", "response_cap", "total_cap",
                           "resumed_from_run", "resumed_from_step", "rounds", "steps_logged", "nodes",
                           "status_counts", "last_activity_at", *RUN_METRICS})
#: the run states of run_state, in the order the runs page offers them
STATES = vocab.RUN_STATES
_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "FLOAT", "DOUBLE", "DECIMAL")


@dataclass
class RunsPage:
    runs: list[dict]
    statuses: list[str]              # every status seen, the status-count columns
    choices: dict[str, list[str]]    # filter -> its values (question, arm, kind, state); "columns": pickable
    filters: dict[str, str | None] = field(default_factory=dict)
    picked: list[str] = field(default_factory=list)   # run_metrics columns added by ?col=
    group: str | None = None                          # GROUPS key, or None
    groups: list[dict] = field(default_factory=list)  # per group: key, runs, mean_<m>, best_<m>
    group_metrics: list[str] = field(default_factory=list)  # the columns a group row aggregates


def runs_page(url: str, question: str | None = None, arm: str | None = None, kind: str | None = None,
              state: str | None = None, columns: list[str] | None = None, group: str | None = None) -> RunsPage:
    """Every run (filtered) as a metric table: its state, model, caps, rounds and steps, the
    headline metrics of run_metrics, its status counts and its own last activity; `columns`
    adds any other run_metrics column; `group` (GROUPS) adds one row per group with the
    group's mean and best of each numeric metric column, computed by SQL over run_metrics."""
    filters = {"question": question, "arm": arm, "kind": kind, "state": state}
    if group is not None and group not in GROUPS:
        raise BadRequestError(f"group={group!r}: group runs by one of {', '.join(GROUPS)}")
    from concurrent.futures import ThreadPoolExecutor

    with reading(url) as con, beside(url, con) as other, ThreadPoolExecutor(1) as at_once:
        types = {name: kind_ for name, kind_, *_ in con.execute('DESCRIBE "run_metrics"').fetchall()}
        picked = _picked_columns(columns or [], types)
        numeric = [c for c in (*RUN_METRICS, *picked) if str(types[c]).startswith(_NUMERIC)]
        where, params = _run_filters(filters)
        windows, order = _group_windows(GROUPS[group], numeric) if group else ("", "")
        aside = at_once.submit(_runs_beside, other) if other is not None else None
        runs = rows(con, RUNS_SQL.format(where=where, windows=windows, order=order), *params)
        counts, choices = aside.result() if aside is not None else _runs_beside(con)
    choices["state"] = list(STATES)
    choices["columns"] = [c for c in types if c not in SHOWN_COLUMNS]
    by_run: dict[str, dict] = {}
    for c in counts:
        by_run.setdefault(c["run_id"], {})[c["status"]] = c["n"]
    statuses = sorted({c["status"] for c in counts}, key=lambda s: (s != "ok", s))
    for run in runs:
        run["status_counts"] = by_run.get(run["run_id"], {})
    groups = _group_rows(runs, GROUPS[group], numeric) if group else []
    return RunsPage(runs, statuses, choices, filters, picked, group, groups, numeric if group else [])


def _runs_beside(con) -> tuple[list[dict], dict]:
    """The runs page's status counts and filter choices: read beside its run_metrics query when
    a second reader is free (on the 30x DuckLake of the 1.3 GB root, 50 ms of four scans
    against the query's 0.35-0.55 s)."""
    counts = rows(con, 'SELECT "run_id", coalesce("status", \'NULL\') AS "status", "n" FROM "run_status_counts"')
    choices = {name: [r[0] for r in con.execute(
        f'SELECT DISTINCT "{column}" FROM "runs" WHERE "{column}" IS NOT NULL ORDER BY 1').fetchall()]
        for name, column in (("question", "question_id"), ("arm", "arm"), ("kind", "kind"))}
    return counts, choices


def _picked_columns(columns: list[str], types: dict) -> list[str]:
    unknown = [c for c in columns if c not in types]
    if unknown:
        raise BadRequestError(f"col={unknown[0]!r}: run_metrics has no such column; pick from "
                              f"{', '.join(c for c in types if c not in SHOWN_COLUMNS)}")
    return [c for c in dict.fromkeys(columns) if c not in SHOWN_COLUMNS]


def _run_filters(filters: dict) -> tuple[str, list]:
    """The WHERE clause of the runs' filters over run_metrics (m), values bound."""
    clauses, params = [], []
    for name, column in FILTERS.items():
        clauses.append(f'(CAST(? AS VARCHAR) IS NULL OR m."{column}" = ?)')
        params += [filters.get(name)] * 2
    return " AND ".join(clauses), params


def _group_windows(key: str, metrics: list[str]) -> tuple[str, str]:
    """The runs query's window columns for grouping by run_metrics.`key` (each run row carries
    its group's runs and each metric's mean and best, so run_metrics is read once), and the
    ORDER BY that lists the groups best first (by their best valid_reward_mean), runs by
    activity within each."""
    over = f'OVER (PARTITION BY m."{key}")'
    parts = [f'count(*) {over} AS "group_runs"']
    for c in metrics:
        best = "min" if c in LOWER_IS_BETTER else "max"
        parts += [f'avg(m."{c}") {over} AS "group_mean_{c}"', f'{best}(m."{c}") {over} AS "group_best_{c}"']
    ranked = '"group_best_valid_reward_mean_best" DESC NULLS LAST, ' if "valid_reward_mean_best" in metrics else ""
    return ", " + ", ".join(parts), f'{ranked}m."{key}" NULLS LAST, '


def _group_rows(runs: list[dict], key: str, metrics: list[str]) -> list[dict]:
    """One row per group, in the runs' order: its key, runs, and the means and bests the
    query's windows computed."""
    groups: dict = {}
    for run in runs:
        if run[key] not in groups:
            groups[run[key]] = {"key": run[key], "runs": run["group_runs"],
                                **{f"{part}_{c}": run[f"group_{part}_{c}"] for c in metrics for part in ("mean", "best")}}
    return list(groups.values())


# --- one run -------------------------------------------------------------------------------

@dataclass
class RunPage:
    data: RunData
    steps: list[dict]      # step_metrics rows
    version: str           # changes whenever a round, step or timing row lands
    life: dict = field(default_factory=dict)         # run_state row
    settings: dict = field(default_factory=dict)     # group -> [{key, value, source}]
    checkpoints: list = field(default_factory=list)
    artifacts: list = field(default_factory=list)
    axes: dict = field(default_factory=dict)         # round -> {"global": step, "wall": time, "wall_from"}
    step_source: str | None = None                   # "step_metrics" | "W&B history" | None


def run_page(url: str, run_id: str) -> RunPage:
    with reading(url) as con, beside(url, con) as other:
        return _run_page(con, run_id, other)


def any_run_page(url: str, run_id: str) -> RunPage | RmPage:
    """The run's page: a reward-model run's (RmPage) or a trainer run's (RunPage), read on one
    connection (a trainer run's with a second beside it)."""
    from warehouse.rm_report import is_reward_model_run as is_rm

    with reading(url) as con:
        if is_rm(con, run_id):
            return _rm_page(con, run_id)
        with beside(url, con) as other:
            return _run_page(con, run_id, other)


@contextlib.contextmanager
def beside(url: str, con):
    """A second reader of what `con` reads, for a page's reads to run at once, or None. On the
    file, another connection of the process's DuckDB for it: no writer commits while this
    process holds the file, so both read the same rows. On DuckLake, a cursor of the pool on
    `con`'s snapshot when one is free (`LakePool.beside`)."""
    from warehouse.config import is_ducklake
    from warehouse.db import connect

    if is_ducklake(url):
        from warehouse.serve.lake import pool

        with pool(url).beside(con) as other:
            yield other
        return
    with connect(url, read_only=True, wait_s=BUSY_WAIT_S) as other:
        yield other


def _run_page(con, run_id: str, other=None) -> RunPage:
    """The page's reads on `con`, its run_metrics row at once on `other` when given (the row
    is most of the page's time: on the 3x DuckLake of the 1.3 GB root 0.20 of 0.46 s)."""
    from concurrent.futures import ThreadPoolExecutor

    from warehouse.serve import details

    def metrics(reader) -> dict:
        try:
            return run_metrics_row(reader, run_id)
        except TerminalError as exc:
            raise NotFoundError(str(exc)) from None

    with ThreadPoolExecutor(1) as at_once:
        row = at_once.submit(metrics, other) if other is not None else None
        data = read_run(con, run_id, metrics(con) if row is None else {})
        steps = rows(con, 'SELECT * FROM "step_metrics" WHERE "run_id" = ? ORDER BY "step"', run_id)
        source = "step_metrics" if steps else None
        if not steps:
            steps = wandb_steps(con, run_id)
            source = "W&B history" if steps else None
        version = _run_version(con, run_id)
        page = RunPage(data, steps, version, data.life, details.settings(con, run_id),
                       details.checkpoints(con, run_id), details.artifacts(con, run_id),
                       round_axes(con, run_id), source)
        if row is not None:
            data.run = row.result()
    return page


def wandb_steps(con, run_id: str) -> list[dict]:
    """Step metrics from the run's imported W&B history (verl's actor/* keys), as step_metrics
    rows; [] when the run has none."""
    import json

    found = con.execute('SELECT h."step", h."row" FROM "wandb_history" AS h JOIN "runs" AS r USING ("wandb_run") '
                        'WHERE r."run_id" = ? AND h."step" IS NOT NULL ORDER BY h."step", h."line_no"',
                        [run_id]).fetchall()
    steps = []
    for step, row in found:
        values = json.loads(row) if isinstance(row, str) else row
        metric = {name: next((values[k] for k in keys if isinstance(values.get(k), (int, float))), None)
                  for name, keys in WANDB_KEYS.items()}
        if any(v is not None for v in metric.values()):
            steps.append({"step": step, **metric})
    return steps


def round_axes(con, run_id: str) -> dict[int, dict]:
    """Per round of the run, its x on the other axes: `global`, the step counted from the
    lineage root (a resumed run that restarts its rounds at 1 continues its parent's count;
    one that kept counting is unchanged), and `wall`, when the round was written by the run's
    own clock where one is known (round_times: the trainer's commit or the time in the files'
    names, else the files' mtime), with `wall_from` saying which."""
    offset = lineage_offset(con, run_id)
    written = {r: (at, source) for r, at, source in con.execute(
        'SELECT "round", "written_at", "written_from" FROM "round_times" WHERE "run_id" = ?', [run_id]).fetchall()}
    rounds = {r for (r,) in con.execute('SELECT DISTINCT "round" FROM "task_rounds" WHERE "run_id" = ? '
                                        'UNION SELECT DISTINCT "step" FROM "steps" WHERE "run_id" = ?',
                                        [run_id, run_id]).fetchall()} | set(written)
    axes = {}
    for r in sorted(rounds):
        at, source = written.get(r, (None, None))
        axes[r] = {"global": r + offset, "wall": at, "wall_from": source}
    return axes


def lineage_offset(con, run_id: str, seen: frozenset = frozenset()) -> int:
    """What `run_id`'s rounds add to count from its lineage root (0 for a run that did not
    resume, or kept counting). The resume link comes from the run's row (RUN_ROW, which the
    page reads anyway: on DuckLake one read a snapshot); the first round is read only for a
    resumed run."""
    row = read_run_row(con, run_id)
    parent, step = row.get("resumed_from_run"), row.get("resumed_from_step")
    if parent is None or parent in seen:
        return 0
    first = con.execute('SELECT min("round") FROM "task_rounds" WHERE "run_id" = ?', [run_id]).fetchone()[0]
    restarts = step is not None and first is not None and first <= step
    return lineage_offset(con, parent, seen | {run_id}) + (step if restarts else 0)


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
        '(SELECT count(*) FROM "task_rounds" WHERE "run_id" = ?), '
        '(SELECT max("end_status") FROM "run_lifecycle" WHERE "run_id" = ?)', [run_id] * 6).fetchone()
    return "-".join("" if v is None else str(v) for v in row)


# --- compare -------------------------------------------------------------------------------

#: The compare page's pickers: every run that run_metrics has a row for (a run of the runs
#: table, or one with nodes, task-rounds or steps), with its arm, model and task set as
#: run_metrics defines them, read from those key tables alone. Reading the three columns from
#: run_metrics computed every run's metrics: DuckDB does not drop the view's unused joins, so
#: the page grew with the runs held (tests/warehouse/serve/test_app.py holds the two equal).
COMPARE_CHOICES_SQL = '''
WITH
keys AS (
    SELECT "run_id" FROM "runs"
    UNION SELECT "run_id" FROM "nodes"
    UNION SELECT "run_id" FROM "task_rounds"
    UNION SELECT "run_id" FROM "steps"
),
task_sets AS (
    SELECT "run_id", string_agg(DISTINCT "task", ',' ORDER BY "task") AS "task_set"
    FROM "nodes"
    GROUP BY "run_id"
)
SELECT k."run_id", r."arm", r."model", t."task_set"
FROM keys AS k
LEFT JOIN "runs" AS r USING ("run_id")
LEFT JOIN task_sets AS t USING ("run_id")
ORDER BY k."run_id"
'''


@dataclass
class Series:
    run_id: str
    arm: str | None
    rounds: list[int]
    values: dict[str, list]          # metric -> one value per round (None where missing)
    reading: dict | None = None      # decision rule at step k: moved, tasks, k
    axes: dict = field(default_factory=dict)  # round -> {"global", "wall"} (round_axes)
    state: str | None = None                  # run_state.state
    model: str | None = None                  # run_metrics.model


@dataclass
class ComparePage:
    series: list[Series]
    k: int | None
    task: str | None
    choices: dict[str, list[str]]    # runs, arms, models, task sets, tasks to pick from
    picked_runs: list[str]
    picked_arms: list[str]
    picked_models: list[str] = field(default_factory=list)
    picked_task_sets: list[str] = field(default_factory=list)


def compare_page(url: str, runs: list[str], arms: list[str], task: str | None = None,
                 k: int | None = None, models: list[str] | None = None,
                 task_sets: list[str] | None = None) -> ComparePage:
    """Per-round metrics of the picked runs (by name, and every run matching the picked arms,
    models and task sets together) on one x axis, and the decision rule's reading at step k
    (default: the last step all of them reached; when they share none, each run's own last
    round)."""
    models, task_sets = models or [], task_sets or []
    with reading(url) as con:
        known = rows(con, COMPARE_CHOICES_SQL)
        choices = {"runs": [r["run_id"] for r in known],
                   "arms": sorted({r["arm"] for r in known if r["arm"] is not None}),
                   "models": sorted({r["model"] for r in known if r["model"] is not None}),
                   "task_sets": sorted({r["task_set"] for r in known if r["task_set"] is not None}),
                   # task_round_metrics' tasks, from its keys' tables (task_rounds, nodes): the
                   # view would compute every task-round's metrics to list them
                   "tasks": [r[0] for r in con.execute(
                       'SELECT "task" FROM "task_rounds" UNION SELECT "task" FROM "nodes" ORDER BY 1').fetchall()]}
        picked = _picked_runs(known, runs, {"arm": arms, "model": models, "task_set": task_sets})
        series = [_series(con, run_id, arm, task) for run_id, arm in picked]
        # a run matched by arm, model or task set with no round (a launch that failed before
        # round 1) has nothing to compare: it is left out, unless it was picked by name
        series = [s for s in series if s.rounds or s.run_id in runs]
        states = _states(con, [s.run_id for s in series])
        model_of = {r["run_id"]: r["model"] for r in known}
        for s in series:
            s.state, s.model = states.get(s.run_id), model_of.get(s.run_id)
        k = k if k is not None else _shared_last_round(series)
        at = {s.run_id: k if k is not None else max(s.rounds) for s in series if k is not None or s.rounds}
        readings = _readings(con, at, task)
        for s in series:
            s.reading = readings.get(s.run_id)
    return ComparePage(series, k, task, choices, runs, arms, models, task_sets)


def _states(con, run_ids: list[str]) -> dict[str, str]:
    """run_state.state of each of the runs (the view filtered to them, not read whole)."""
    if not run_ids:
        return {}
    marks = ", ".join("?" * len(run_ids))
    return dict(con.execute(f'SELECT "run_id", "state" FROM "run_state" WHERE "run_id" IN ({marks})',
                            run_ids).fetchall())


def _picked_runs(known: list[dict], runs: list[str], groups: dict[str, list[str]]) -> list[tuple[str, str | None]]:
    """The runs named, then every run whose arm, model and task set are each among the picked
    ones (a group with nothing picked does not narrow); nothing but the named runs when no
    group is picked."""
    arm_of = {r["run_id"]: r["arm"] for r in known}
    missing = [r for r in runs if r not in arm_of]
    if missing:
        raise NotFoundError(f"no run {', '.join(map(repr, missing))} in the warehouse")
    narrowing = {column: set(values) for column, values in groups.items() if values}
    matched = [r["run_id"] for r in known
               if narrowing and all(r[column] in values for column, values in narrowing.items())]
    return [(r, arm_of[r]) for r in dict.fromkeys(runs + matched)]


def _series(con, run_id: str, arm: str | None, task: str | None) -> Series:
    """The run's round values: the mean over its tasks (view round_task_means), or the one
    task's own (task_round_metrics)."""
    columns = ", ".join(f'"{m}"' for m in COMPARE_METRICS)
    if task is None:
        found = rows(con, f'SELECT "round", {columns} FROM "round_task_means" WHERE "run_id" = ? ORDER BY "round"',
                     run_id)
    else:
        found = rows(con, f'SELECT "round", {columns} FROM "task_round_metrics" WHERE "run_id" = ? AND "task" = ? '
                          'ORDER BY "round"', run_id, task)
    return Series(run_id, arm, [r["round"] for r in found],
                  {m: [r[m] for r in found] for m in COMPARE_METRICS}, axes=round_axes(con, run_id))


def _shared_last_round(series: list[Series]) -> int | None:
    series = [s for s in series if s.rounds]  # a run without rounds shares none, and reads nothing
    shared = set.intersection(*(set(s.rounds) for s in series)) if series else set()
    return max(shared) if shared else None


def _readings(con, at: dict[str, int], task: str | None) -> dict[str, dict]:
    """The decision rule's reading of each run at its step (`at`: run -> k), in one statement:
    decision_rule computes every run's rows at once, so one read for all the picked runs."""
    if not at:
        return {}
    pairs = ", ".join("(?, ?)" for _ in at)
    found = {run_id: row for run_id, *row in con.execute(
        f'SELECT d."run_id", count(*) FILTER (WHERE d."moved"), count(d."delta"), count(*) '
        f'FROM "decision_rule" AS d JOIN (VALUES {pairs}) AS p("run_id", "k") USING ("run_id", "k") '
        'WHERE CAST(? AS VARCHAR) IS NULL OR d."task" = ? GROUP BY d."run_id"',
        [v for pair in at.items() for v in pair] + [task, task]).fetchall()}
    return {run_id: dict(zip(("k", "moved", "measured", "tasks"), (k, *found.get(run_id, (0, 0, 0)))))
            for run_id, k in at.items()}


# --- quality and nodes ---------------------------------------------------------------------

def violations(url: str) -> list[dict]:
    with reading(url) as con:
        return rows(con, 'SELECT * FROM "invariant_violations" ORDER BY "check_no", "run_id", '
                         '"round", "task", "node_id"')


def expectations(url: str):
    """`warehouse check`'s report (warehouse.quality.runner.run_checks): one outcome per
    expectation, passed or not, with up to 5 offending rows each."""
    from warehouse.quality.runner import run_checks

    return run_checks(url, examples=5)


NODE_SQL = '''
SELECT n."run_id", n."round", n."task", n."node_id", n."mode", n."status", n."reward",
       n."parent_id", n."sibling_group", n."exc_type", n."exec_time", n."test_metric",
       n."n_response_tokens", n."plan", n."term_tail", n."source_id", n."line_no", n."depth",
       n."exec_pending_s", n."exec_stage_s", n."exec_exec_s", n."exec_retrieve_s", n."returncode",
       n."mem_peak_gi", n."gpu_util", n."source", n."policy_version",
       tt."advantage", tt."step" AS "train_step"
FROM "nodes" AS n
LEFT JOIN "node_train_tokens" AS tt ON tt."run_id" = n."run_id" AND tt."source_id" = n."source_id"
                                   AND tt."line_no" = n."line_no"
WHERE n."run_id" = ? AND n."node_id" = ?
  AND (CAST(? AS INTEGER) IS NULL OR n."round" = ?)
ORDER BY n."round", n."source_id", n."line_no"
LIMIT 1
'''
#: The node's payload text, by its key once the node is found: a join of nodes to
#: node_payloads built its hash table from every payload's key, which grows with the warehouse
PAYLOAD_TEXT_SQL = '''
SELECT "code", "prompt_messages", "raw_completion", "thinking"
FROM "node_payloads"
WHERE "source_id" = ? AND "line_no" = ?
'''
#: The node's token arrays, read apart from its page: reading them reads the arrays of the
#: whole row group the payload sits in (2,048 payloads), seconds for long responses, where the
#: page's text columns are read a row at a time.
TOKENS_SQL = '''
SELECT p."response_token_ids", p."response_logprobs", tt."trainer_logprobs", tt."ref_logprobs"
FROM "node_payloads" AS p
LEFT JOIN "node_train_tokens" AS tt USING ("source_id", "line_no")
WHERE p."source_id" = ? AND p."line_no" = ?
'''
#: TOKENS_SQL a part each, which a file reads at once on cursors of its own: DuckDB reads a
#: LIST column of a row group in one thread, and ids and logprobs are one each
TOKEN_PARTS = (
    'SELECT "response_token_ids" FROM "node_payloads" WHERE "source_id" = ? AND "line_no" = ?',
    'SELECT "response_logprobs" FROM "node_payloads" WHERE "source_id" = ? AND "line_no" = ?',
    'SELECT "trainer_logprobs", "ref_logprobs" FROM "node_train_tokens" WHERE "source_id" = ? AND "line_no" = ?',
)


@dataclass
class NodePage:
    node: dict
    family: dict           # parent, siblings, children, group (rollouts.family)
    tokens: object = None  # rollouts.Tokens, when the token section was asked for


def node(url: str, run_id: str, node_id: str, round_no: int | None = None,
         all_tokens: bool = False, shade_by: str = "sampler", part: str = "page") -> NodePage:
    """One node: with `part` "page", its payload's text (plan, code, term_tail, the prompt
    messages) and its family; with "tokens", its response token by token (the first
    rollouts.SHOWN_TOKENS unless `all_tokens`, shaded by `shade_by`, rollouts.SHADES), which
    the page loads apart."""
    from warehouse.serve import rollouts

    with reading(url) as con:
        found = rows(con, NODE_SQL, run_id, node_id, round_no, round_no)
        if not found:
            raise NotFoundError(f"no node {node_id!r} in run {run_id!r}")
        record = found[0]
        if part == "tokens":
            record.update(token_arrays(url, con, record["source_id"], record["line_no"]))
            run = read_run_row(con, run_id)
            return NodePage(record, {}, rollouts.tokens(
                record, run, shown=None if all_tokens else rollouts.SHOWN_TOKENS, shade_by=shade_by))
        texts = rows(con, PAYLOAD_TEXT_SQL, record["source_id"], record["line_no"])
        record.update(texts[0] if texts else dict.fromkeys(("code", "prompt_messages", "raw_completion", "thinking")))
        family = rollouts.family(con, record)
    record["prompt_messages"] = rollouts.prompt_messages(record["prompt_messages"])
    return NodePage(record, family)


def token_arrays(url: str, con, source_id: int, line_no: int) -> dict:
    """The payload's token arrays and the trainer's (TOKENS_SQL's columns; {} without a
    payload). On the file, TOKEN_PARTS run at once, each on a cursor of the process's DuckDB
    for the file (the 30x warehouse's longest response: 0.44 s -> 0.28 s); a lake's request
    reads its one snapshot on its one cursor."""
    from concurrent.futures import ThreadPoolExecutor

    from warehouse.config import is_ducklake
    from warehouse.db import connect

    if is_ducklake(url):
        found = rows(con, TOKENS_SQL, source_id, line_no)
        return found[0] if found else {}

    def read(sql: str) -> list[dict]:
        with connect(url, read_only=True, wait_s=BUSY_WAIT_S) as cursor:
            return rows(cursor, sql, source_id, line_no)

    with ThreadPoolExecutor(len(TOKEN_PARTS)) as pool:
        ids, logprobs, trained = pool.map(read, TOKEN_PARTS)
    if not ids:
        return {}
    return {**ids[0], **logprobs[0], **(trained[0] if trained else {"trainer_logprobs": None, "ref_logprobs": None})}


def nodes_page(url: str, run_id: str, params) -> object:
    """The rollout browser: the run's nodes filtered by task, round, status, mode, group,
    reward and length (rollouts.NodeQuery), a page at a time."""
    from warehouse.serve import rollouts

    with reading(url) as con:
        if not _has_rows(con, run_id):
            raise NotFoundError(f"no run {run_id!r} in the warehouse")
        return rollouts.node_list(con, run_id, rollouts.NodeQuery.from_params(params))


def _has_rows(con, run_id: str) -> bool:
    """Whether run_metrics has a row for the run: one of the tables its rows come from (runs,
    nodes, task_rounds, steps) names it. Read from those tables' keys, not through the view,
    which would compute the run's metrics to answer. A table at a time, runs first (where a
    run almost always is): one statement of four EXISTS read all four."""
    return any(con.execute(f'SELECT 1 FROM "{table}" WHERE "run_id" = ? LIMIT 1', [run_id]).fetchall()
               for table in ("runs", "nodes", "task_rounds", "steps"))


# --- reward-model runs ----------------------------------------------------------------------

@dataclass
class RmPage:
    data: object               # warehouse.rm_report.RmRunData
    proxy_vs_final: list[dict]  # rm_proxy_vs_final rows
    life: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    artifacts: list = field(default_factory=list)


def _rm_page(con, run_id: str) -> RmPage:
    """A reward-model run: the static report's data (rm_report) plus its proxy/final pairs."""
    from warehouse.rm_report import read_rm_run

    from warehouse.serve import details

    data = read_rm_run(con, run_id)
    pairs = rows(con, 'SELECT * FROM "rm_proxy_vs_final" WHERE "run_id" = ? ORDER BY "job", "progress"', run_id)
    return RmPage(data, pairs, read_life(con, run_id), details.settings(con, run_id),
                  details.artifacts(con, run_id))
