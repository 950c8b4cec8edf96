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

SIBLING_GROUPS_SQL = """
INSERT INTO sibling_groups (run_id, round, task, sibling_group, expansion_step, parent_id, size,
                            source_id)
WITH n AS (
  SELECT * FROM nodes WHERE run_id = $run AND round = $round AND task = $task
    AND sibling_group IS NOT NULL
),
-- 002 records carry the expansion index in `step`; 000 records say 0 everywhere, so there
-- the order of first appearance in the file is the expansion index.
steps_vary AS (SELECT count(DISTINCT coalesce(step, -1)) > 1 AS vary FROM n),
g AS (
  SELECT sibling_group, count(*) AS size, min(step) AS min_step, min(source_id) AS source_id,
         min(CAST(source_id AS BIGINT) * 1000000000 + line_no) AS first_pos,
         CASE WHEN count(parent_id) = count(*) AND count(DISTINCT parent_id) = 1
              THEN min(parent_id) END AS parent_id
  FROM n GROUP BY sibling_group
)
SELECT $run, $round, $task, sibling_group,
       CASE WHEN (SELECT vary FROM steps_vary) THEN min_step
            ELSE CAST(row_number() OVER (ORDER BY first_pos) - 1 AS INTEGER) END,
       parent_id, size, source_id
FROM g
"""


def refresh_sibling_groups(con, run_id: str, round: int, task: str) -> None:
    params = {"run": run_id, "round": round, "task": task}
    con.execute("DELETE FROM sibling_groups WHERE run_id = $run AND round = $round "
                "AND task = $task", params)
    con.execute(SIBLING_GROUPS_SQL, params)


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


def upsert_round(con, run_id: str, round: int, source_path: str | None) -> None:
    con.execute("INSERT INTO rounds (run_id, round, source_path) SELECT ?, ?, ? WHERE NOT EXISTS "
                "(SELECT 1 FROM rounds WHERE run_id = ? AND round = ?)",
                [run_id, round, source_path, run_id, round])


RUN_COLUMNS = ("run_id", "question_id", "arm", "kind", "wandb_run", "resumed_from_run",
               "resumed_from_step", "lost", "started_at", "source_path", "model", "seed",
               "overrides", "notes")


def upsert_run(con, run: dict) -> None:
    """Insert or replace one `runs` row.

    `run` holds `runs` columns; `resumed_from={"run": ..., "step": ...}` is accepted for
    `resumed_from_run`/`resumed_from_step`, `started_at` defaults to the run id's timestamp,
    `kind` to "unknown" and `lost` to false.
    """
    row = dict(run)
    resumed = row.pop("resumed_from", None) or {}
    row.setdefault("resumed_from_run", resumed.get("run"))
    row.setdefault("resumed_from_step", resumed.get("step"))
    row.setdefault("kind", "unknown")
    row["lost"] = bool(row.get("lost", False))
    row.setdefault("started_at", started_at(row["run_id"]))
    if isinstance(row.get("overrides"), dict):
        row["overrides"] = json.dumps(row["overrides"])
    values = [row.get(col) for col in RUN_COLUMNS]
    cols = ", ".join(qi(c) for c in RUN_COLUMNS)
    marks = ", ".join("?" for _ in RUN_COLUMNS)
    # delete, then insert, rather than INSERT OR REPLACE: DuckLake has no primary keys
    con.execute("DELETE FROM runs WHERE run_id = ?", [row["run_id"]])
    con.execute(f"INSERT INTO runs ({cols}) VALUES ({marks})", values)


_STAMP = re.compile(r"^(\d{8}_\d{6})")


def started_at(run_id: str) -> datetime | None:
    """The timestamp a run id starts with (`20260701_231713...`), else None."""
    match = _STAMP.match(run_id)
    if not match:
        return None
    try:
        return datetime.strptime(match.group(1), "%Y%m%d_%H%M%S")
    except ValueError:
        return None
