"""The record-level API: the trainers write their rows straight into the warehouse.

Same schema, same normalization, same derived rows as `warehouse ingest` on files: each
record list is turned into JSON lines and goes through `ingest.normalize` and `ingest.load`,
exactly like the lines of a `<task>__<ts>.jsonl` file. Nothing here opens or commits a
transaction, so a caller groups a whole round (its nodes, its step's timing row and metrics)
atomically in `warehouse.db.transaction`, which on DuckLake redoes a commit that lost to
another writer's (`train.writer.commit_round` does exactly this)::

    from ingest.records import load_step_metrics, load_steps, load_task_round, upsert_run
    from warehouse.db import connect, transaction

    run = "20261129_081500_mini"

    def write_round():
        upsert_run(con, {"run_id": run, "arm": None, "kind": "training"})
        for task, records in round_records.items():
            load_task_round(con, run_id=run, round=3, task=task, records=records,
                            summary=summaries.get(task), source_path=f"train://{run}/round_3/{task}")
        load_steps(con, run, [{"step": 3, "total_s": 41.2, "phases_s": {"gen": 30.0}}],
                   source_path=f"train://{run}/round_3/timing")
        load_step_metrics(con, run, [{"step": 3, "loss": 0.12, "kl": 0.004}],
                          source_path=f"train://{run}/round_3/step_metrics")

    with connect("duckdb:///warehouse.duckdb") as con:   # at schema head (`warehouse init`)
        transaction(con, write_round)

The reward-model tables have theirs in :mod:`ingest.rm_records`, used the same way, and a
run's lifecycle row (started, heartbeat, ended) in :mod:`ingest.run_state`.

Loading the same `source_path` again replaces what the previous load wrote (nodes, payloads,
errors; the task-round and its groups are recomputed). Malformed records are not raised:
they become `ingest_errors` rows, as a bad file line would; the return value counts the
records that landed.
"""
from __future__ import annotations

import json

from ingest import derive, load
from ingest.lines import records_to_lines
from ingest.sources import content_hash, lookup_source_id, open_source

__all__ = ["upsert_run", "insert_new_run", "load_task_round", "load_steps", "load_step_metrics"]

upsert_run = derive.upsert_run
insert_new_run = derive.insert_new_run  # a trainer claims its run id with this (train.writer)


def load_task_round(con, *, run_id: str, round: int, task: str, records: list[dict],
                    summary: dict | None, source_path: str, kind: str = "train_round") -> int:
    """Write one task-round's node records (and its summary) inside the caller's transaction.

    Writes sources, nodes, node_payloads, sibling_groups, task_rounds and rounds. `records`
    are node records in the seed schemas (A, B or C; unknown keys land in `extra`).
    `summary`, when given, is the round summary (docs/data-roots.md fields) and is kept as a second
    source `<source_path>#summary`. Returns the number of records that landed.
    """
    raw = records_to_lines(records)
    rows = _land(con, kind, raw, source_path, run_id, round, task,
                 lambda source, staged: load.land_nodes(con, source, 0, staged,
                                                        _round_path(source_path)))
    if summary is not None:
        summary_raw = records_to_lines([summary])
        _land(con, "train_summary", summary_raw, source_path + "#summary", run_id, round, task,
              lambda source, staged: load.land_summary(con, source, 0, staged,
                                                       _round_path(source_path)))
    return rows


def load_steps(con, run_id: str, rows: list[dict], source_path: str) -> int:
    """Write timing rows (`{"step", "total_s", "phases_s": {...}}`) for `run_id`.

    Returns the number of rows that landed. Loading the same `source_path` again replaces
    the rows of the previous load, so a trainer can rewrite its whole timing log each step.
    """
    raw = records_to_lines(rows)
    return _land(con, "train_steps", raw, source_path, run_id, None, None,
                 lambda source, staged: load.land_timing(con, source, 0, staged))


def load_step_metrics(con, run_id: str, rows: list[dict], source_path: str) -> int:
    """Write the learner's metrics (`{"step", "loss", "kl", ...}`, unknown keys to `extra`).

    One `step_metrics` row per run and step: writing a step again replaces its row. Returns
    the number of rows that landed; a row without a whole-number `step` is an ingest_errors row.
    """
    raw = records_to_lines(rows)
    return _land(con, "train_step_metrics", raw, source_path, run_id, None, None,
                 lambda source, staged: load.land_step_metrics(con, source, 0, staged))


def _land(con, kind: str, raw, source_path: str, run_id: str, round, task, land) -> int:
    staged = load.stage(con, load.STAGED_KIND[kind], [(0, raw)], optimistic=False)
    source_id, existed = lookup_source_id(con, source_path)
    digest = content_hash(json.dumps(raw.lines).encode("utf-8"))
    source = open_source(con, source_id=source_id, existed=existed, path=source_path, kind=kind,
                         run_id=run_id, round=round, task=task, digest=digest,
                         rows=staged.rows[0], rejected=len(staged.errors[0]))
    land(source, staged)
    load.drop_staged(con)
    return staged.rows[0]


def _round_path(source_path: str) -> str | None:
    head, sep, _ = source_path.rpartition("/")
    return head if sep else None
