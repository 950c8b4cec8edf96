"""Rows derived from what landed: sibling_groups, task_rounds flags, rounds, runs.

All are upserts keyed by their natural keys, so loading files in any order, or loading one
again, converges on the same rows.
"""
from __future__ import annotations

import json
import re
from datetime import datetime

from warehouse.db import quote_identifier as qi

TASK_ROUND_FLAGS = ("summary_present", "node_file_present", "has_tree", "has_transcript")

def refresh_sibling_groups(con, task_rounds: list[tuple[str, int, str]]) -> None:
    """Recompute the sibling_groups rows of these (run, round, task)s from their nodes; one
    statement for them all (a statement per task-round would scan `nodes` once each)."""
    distinct = list(dict.fromkeys(task_rounds))
    keys = ", ".join("(CAST(? AS VARCHAR), CAST(? AS INTEGER), CAST(? AS VARCHAR))"
                     for _ in distinct)
    params = [v for key in distinct for v in key]
    tr = f"(VALUES {keys}) AS tr(run_id, round, task)"
    con.execute(f"DELETE FROM sibling_groups AS s USING {tr} WHERE s.run_id = tr.run_id "
                "AND s.round = tr.round AND s.task = tr.task", params)
    con.execute(SIBLING_GROUPS_SQL.format(task_rounds=tr), params)


SIBLING_GROUPS_SQL = """
INSERT INTO sibling_groups (run_id, round, task, sibling_group, expansion_step, parent_id, size,
                            source_id)
WITH n AS (
  SELECT nodes.* FROM nodes JOIN {task_rounds} USING (run_id, round, task)
  WHERE sibling_group IS NOT NULL
),
-- 002 records carry the expansion index in `step`; 000 records say 0 everywhere, so there
-- the order of first appearance in the file is the expansion index.
steps_vary AS (
  SELECT run_id, round, task, count(DISTINCT coalesce(step, -1)) > 1 AS vary
  FROM n GROUP BY run_id, round, task
),
g AS (
  SELECT run_id, round, task, sibling_group, count(*) AS size, min(step) AS min_step,
         min(source_id) AS source_id,
         min(CAST(source_id AS BIGINT) * 1000000000 + line_no) AS first_pos,
         CASE WHEN count(parent_id) = count(*) AND count(DISTINCT parent_id) = 1
              THEN min(parent_id) END AS parent_id
  FROM n GROUP BY run_id, round, task, sibling_group
)
SELECT g.run_id, g.round, g.task, sibling_group,
       CASE WHEN v.vary THEN min_step
            ELSE CAST(row_number() OVER (PARTITION BY g.run_id, g.round, g.task
                                         ORDER BY first_pos) - 1 AS INTEGER) END,
       parent_id, size, source_id
FROM g JOIN steps_vary AS v USING (run_id, round, task)
"""


def upsert_task_round(con, run_id: str, round: int, task: str, values: dict) -> None:
    """Set `values` on the task-round, inserting it first if new (flags false unless given).

    UPDATE-then-INSERT rather than ON CONFLICT: DuckDB's upsert is several times slower.
    """
    key = [run_id, round, task]
    if values:
        sets = ", ".join(f"{qi(c)} = ?" for c in values)
        updated = con.execute(f"UPDATE task_rounds SET {sets} WHERE run_id = ? AND round = ? "
                              "AND task = ?", [*values.values(), *key]).fetchone()[0]
        if updated:
            return
    row = {**{flag: False for flag in TASK_ROUND_FLAGS}, **values}
    cols = ", ".join(qi(c) for c in ("run_id", "round", "task", *row))
    marks = ", ".join("?" for _ in range(3 + len(row)))
    con.execute(f"INSERT INTO task_rounds ({cols}) SELECT {marks} WHERE NOT EXISTS (SELECT 1 "
                "FROM task_rounds WHERE run_id = ? AND round = ? AND task = ?)",
                [*key, *row.values(), *key])


def mark_node_files(con, task_rounds: list[tuple[str, int, str, int]]) -> None:
    """`node_file_present` and `node_source_id` on these (run, round, task, source_id)s,
    inserting the task-rounds not there yet; one statement each for them all. A task-round
    listed twice keeps its last source, as an upsert per file would."""
    last = {(run, rnd, task): source_id for run, rnd, task, source_id in task_rounds}
    marks = ", ".join("(CAST(? AS VARCHAR), CAST(? AS INTEGER), CAST(? AS VARCHAR), CAST(? AS BIGINT))"
                      for _ in last)
    params = [v for key, source_id in last.items() for v in (*key, source_id)]
    v = f"(VALUES {marks}) AS v(run_id, round, task, source_id)"
    same = "t.run_id = v.run_id AND t.round = v.round AND t.task = v.task"
    con.execute(f"UPDATE task_rounds AS t SET node_file_present = true, node_source_id = v.source_id "
                f"FROM {v} WHERE {same}", params)
    flags = [flag for flag in TASK_ROUND_FLAGS if flag != "node_file_present"]
    cols = ", ".join(qi(c) for c in ("run_id", "round", "task", *flags, "node_file_present", "node_source_id"))
    con.execute(f"INSERT INTO task_rounds ({cols}) SELECT v.run_id, v.round, v.task, "
                f"{', '.join('false' for _ in flags)}, true, v.source_id FROM {v} "
                f"WHERE NOT EXISTS (SELECT 1 FROM task_rounds AS t WHERE {same})", params)


def upsert_round(con, run_id: str, round: int, source_path: str | None) -> None:
    upsert_rounds(con, [(run_id, round, source_path)])


#: rounds one statement of `upsert_rounds` inserts at most (its VALUES list)
ROUNDS_PER_STATEMENT = 1000


def upsert_rounds(con, rounds: list[tuple[str, int, str | None]]) -> None:
    """The `rounds` rows of these (run, round, source path)s that are not there yet, one
    statement for them all (a statement per file read the rounds table again each time: on
    DuckLake, its catalog too). A round listed twice keeps its first path, as an upsert per
    file in that order would."""
    first: dict[tuple[str, int], str | None] = {}
    for run_id, rnd, path in rounds:
        first.setdefault((run_id, rnd), path)
    items = list(first.items())
    for start in range(0, len(items), ROUNDS_PER_STATEMENT):
        chunk = items[start:start + ROUNDS_PER_STATEMENT]
        marks = ", ".join("(CAST(? AS VARCHAR), CAST(? AS INTEGER), CAST(? AS VARCHAR))" for _ in chunk)
        con.execute(f"INSERT INTO rounds (run_id, round, source_path) SELECT v.run_id, v.round, v.source_path "
                    f"FROM (VALUES {marks}) AS v(run_id, round, source_path) WHERE NOT EXISTS "
                    "(SELECT 1 FROM rounds AS r WHERE r.run_id = v.run_id AND r.round = v.round)",
                    [v for (run_id, rnd), path in chunk for v in (run_id, rnd, path)])


RUN_COLUMNS = ("run_id", "question_id", "arm", "kind", "wandb_run", "resumed_from_run",
               "resumed_from_step", "lost", "started_at", "source_path", "model", "seed",
               "overrides", "notes", "settings_sources")
_RUN_COLS = ", ".join(qi(c) for c in RUN_COLUMNS)
_RUN_MARKS = ", ".join("?" for _ in RUN_COLUMNS)


def upsert_run(con, run: dict) -> None:
    """Insert or replace one `runs` row.

    `run` holds `runs` columns; `resumed_from={"run": ..., "step": ...}` is accepted for
    `resumed_from_run`/`resumed_from_step`, `started_at` defaults to the run id's timestamp,
    `kind` to "unknown" and `lost` to false.
    """
    values = _run_values(run)
    # delete, then insert, rather than INSERT OR REPLACE: DuckLake has no primary keys
    con.execute("DELETE FROM runs WHERE run_id = ?", [run["run_id"]])
    con.execute(f"INSERT INTO runs ({_RUN_COLS}) VALUES ({_RUN_MARKS})", values)


def insert_new_run(con, run: dict) -> bool:
    """Insert the `runs` row of a new run; False (and nothing written) when the id is taken.

    Inside the caller's transaction, so the check and the insert are one step: the warehouse
    file admits one writing process at a time, and the primary key refuses a second row.
    """
    inserted = con.execute(f"INSERT INTO runs ({_RUN_COLS}) SELECT {_RUN_MARKS} WHERE NOT EXISTS "
                           "(SELECT 1 FROM runs WHERE run_id = ?)", [*_run_values(run), run["run_id"]]).fetchone()
    return bool(inserted and inserted[0])


def _run_values(run: dict) -> list:
    row = dict(run)
    resumed = row.pop("resumed_from", None) or {}
    row.setdefault("resumed_from_run", resumed.get("run"))
    row.setdefault("resumed_from_step", resumed.get("step"))
    row.setdefault("kind", "unknown")
    row["lost"] = bool(row.get("lost", False))
    row.setdefault("started_at", started_at(row["run_id"]))
    for column in ("overrides", "settings_sources"):
        if isinstance(row.get(column), dict):
            row[column] = json.dumps(row[column])
    return [row.get(col) for col in RUN_COLUMNS]


_STAMP = re.compile(r"^(\d{8}_\d{6})(_\d{6}(?!\d))?")


def started_at(run_id: str) -> datetime | None:
    """The timestamp a run id starts with (`20260701_231713...`, or to the microsecond
    `20261201_021530_123456...` as `train run` names runs), else None."""
    match = _STAMP.match(run_id)
    if not match:
        return None
    try:
        return datetime.strptime("".join(filter(None, match.groups())),
                                 "%Y%m%d_%H%M%S_%f" if match.group(2) else "%Y%m%d_%H%M%S")
    except ValueError:
        return None
