"""Land normalized lines in the schema: one source at a time, inside the caller's transaction.

Two steps. `stage` runs the shared normalization (`normalize.py`) over a batch of sources at
once (one query plan per batch, not per file) into temp tables. Then one `land_*` call per
source, inside the caller's transaction, inserts the rows that passed, writes an `ingest_errors`
row for every rejected or noteworthy line, and updates the derived rows. The file walker
(`pipeline.py`) and the trainer's record API (`records.py`) both go through here.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ingest import derive
from ingest.lines import RawLines, explain_json_error
from ingest.normalize import normalize
from ingest.sources import Source, record_errors
from warehouse import tokens
from warehouse.db import quote_identifier as qi
from warehouse.vocabulary import (NODE_DERIVED_COLUMNS, NODE_PAYLOAD_FIELDS, NODE_TRAIN_TOKEN_DERIVED_COLUMNS,
                                  NODE_TRAIN_TOKEN_FIELDS, STEP_METRIC_FIELDS, STEP_PHASE_COLUMNS, SUMMARY_FIELDS,
                                  node_columns)

NODE_COLUMNS = (*node_columns(), *NODE_DERIVED_COLUMNS)
PAYLOAD_COLUMNS = tuple(f.key for f in NODE_PAYLOAD_FIELDS)
TRAIN_TOKEN_COLUMNS = (*(f.column for f in NODE_TRAIN_TOKEN_FIELDS), *NODE_TRAIN_TOKEN_DERIVED_COLUMNS)
STEP_METRIC_COLUMNS = tuple(f.column for f in STEP_METRIC_FIELDS) + ("extra",)
STEP_COLUMNS = ("step", "total_s", *STEP_PHASE_COLUMNS, "extra")
SUMMARY_COLUMNS = tuple(f.column for f in SUMMARY_FIELDS) + ("extra",)
STAGED_KIND = {"nodes": "node", "summary": "summary", "timing": "timing",
               "wandb_history": "history", "wandb_config": "history",
               "wandb_summary": "history", "train_round": "node", "train_summary": "summary",
               "train_steps": "timing", "step_metrics": "step_metric",
               "train_step_metrics": "step_metric"}


@dataclass
class Staged:
    """What `stage` learned per batch key: rows that may land, and reasons per line."""

    rows: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    errors: dict[int, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))
    notes: dict[int, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))

    def reasons(self, key: int) -> dict[int, str]:
        """Rejections and notes of one source, one reason string per line."""
        out = dict(self.errors[key])
        for line_no, note in self.notes[key].items():
            out[line_no] = f"{out[line_no]}; {note}" if line_no in out else note
        return out


def stage(con, kind: str, batch: list[tuple[int, RawLines]], optimistic: bool = True) -> Staged:
    """Normalize a batch of (key, lines) of one record kind into `_bad` / `_typed`.

    `optimistic=False` inside a caller's transaction (see `normalize`).
    """
    import pyarrow as pa

    table = pa.concat_tables([raw.arrow(key) for key, raw in batch])
    con.register("_raw", table)
    try:
        normalize(con, kind, optimistic)
    finally:
        con.unregister("_raw")
    staged = Staged()
    for key, raw in batch:
        staged.notes[key].update(raw.notes)
    _collect(con, staged, kind)
    return staged


def _collect(con, staged: Staged, kind: str) -> None:
    for key, n in con.execute("SELECT key, count(*) FROM _typed WHERE reject_reason IS NULL "
                              "GROUP BY key").fetchall():
        staged.rows[key] = n
    bad = con.execute("SELECT key, line_no, error, line FROM _bad").fetchall()
    for key, line_no, error, text in bad:
        staged.errors[key][line_no] = explain_json_error(text) or error
    for key, line_no, reason in con.execute("SELECT key, line_no, reject_reason FROM _typed "
                                            "WHERE reject_reason IS NOT NULL").fetchall():
        staged.errors[key][line_no] = reason
    if kind == "node":
        _note_duplicate_ids(con, staged)


def _note_duplicate_ids(con, staged: Staged) -> None:
    """Repeated node ids are kept (invariant 9 reports them) and noted on the later lines."""
    dups = con.execute("SELECT key, node_id, list(line_no ORDER BY line_no) FROM _typed "
                       "WHERE reject_reason IS NULL GROUP BY key, node_id "
                       "HAVING count(*) > 1").fetchall()
    for key, node_id, lines in dups:
        for line_no in lines[1:]:
            staged.notes[key][line_no] = (f"kept: duplicate id {node_id!r} (first at line "
                                          f"{lines[0]}); invariant 9 reports it")


def drop_staged(con) -> None:
    for name in ("_bad", "_typed"):
        con.execute(f"DROP TABLE IF EXISTS {name}")


# --- landing one source ----------------------------------------------------------------------

def land_nodes(con, source: Source, key: int, staged: Staged, round_path: str | None) -> None:
    """A task-round's node records -> nodes + node_payloads (+ groups, task_round, round)."""
    insert_nodes(con, {key: source})
    derive.refresh_sibling_groups(con, [(source.run_id, source.round, source.task)])
    derive.mark_node_files(con, [(source.run_id, source.round, source.task, source.source_id)])
    derive_nodes(con, {key: source}, staged, {key: round_path})


def insert_nodes(con, sources: dict[int, Source]) -> None:
    """The nodes and payloads of several sources (batch key -> source) of one staged batch,
    one INSERT each: a statement per source would read the whole batch, payloads included,
    once per source."""
    keys = ", ".join("(CAST(? AS INTEGER), CAST(? AS BIGINT), CAST(? AS VARCHAR), "
                     "CAST(? AS INTEGER), CAST(? AS VARCHAR))" for _ in sources)
    params = [v for key, s in sources.items() for v in (key, s.source_id, s.run_id, s.round, s.task)]
    by_key = f"_typed AS t JOIN (VALUES {keys}) AS m(key, source_id, run_id, round, task) USING (key)"
    cols = ", ".join(qi(c) for c in NODE_COLUMNS)
    con.execute(f"INSERT INTO nodes (source_id, line_no, run_id, round, task, {cols}) "
                f"SELECT m.source_id, t.line_no, m.run_id, m.round, m.task, {cols} FROM {by_key} "
                "WHERE t.reject_reason IS NULL", params)
    payload = ", ".join(qi("p_" + c) for c in PAYLOAD_COLUMNS)
    con.execute(f"INSERT INTO node_payloads (source_id, line_no, {', '.join(PAYLOAD_COLUMNS)}) "
                f"SELECT m.source_id, t.line_no, {payload} FROM {by_key} "
                "WHERE t.reject_reason IS NULL", params)
    tokens.write_index(con, f"{by_key} WHERE t.reject_reason IS NULL", [s.source_id for s in sources.values()],
                       params, source_id="m.source_id", line_no="t.line_no", ids="t.p_response_token_ids")
    insert_train_tokens(con, by_key, params)


def insert_train_tokens(con, by_key: str, params: list) -> None:
    """The trainer's per-token record of the trained nodes (those with `trainer_logprobs`), with
    its sums against the node's sampler logprobs (docs/metrics.md, logprob_mismatch)."""
    cols = ", ".join(qi(c) for c in TRAIN_TOKEN_COLUMNS)
    values = ", ".join(qi("p_" + f.key) for f in NODE_TRAIN_TOKEN_FIELDS)
    con.execute(f"INSERT INTO node_train_tokens (source_id, line_no, run_id, {cols}) "
                f"SELECT m.source_id, t.line_no, m.run_id, {values}, {TRAIN_TOKEN_SUMS} FROM {by_key} "
                "WHERE t.reject_reason IS NULL AND t.p_trainer_logprobs IS NOT NULL", params)


# |trainer - sampler| per token over the response's positions (list_zip pads the shorter list with
# NULL, which every sum, max and count below skips), and the loss's k3 KL (train.learn.loss.k3_kl);
# the trainer's arrays as stored (float32), so the sums agree with the views that read them
_TRAINER, _REF = "CAST(t.p_trainer_logprobs AS FLOAT[])", "CAST(t.p_ref_logprobs AS FLOAT[])"
_DELTAS = (f"list_transform(list_zip({_TRAINER}, t.p_response_logprobs)[:len(t.p_trainer_logprobs)], "
           "z -> abs(z[1] - z[2]))")
_K3 = (f"list_transform(list_zip({_TRAINER}, {_REF}), "
       "z -> exp(least(greatest(z[2] - z[1], -20), 20)) - least(greatest(z[2] - z[1], -20), 20) - 1)")
TRAIN_TOKEN_SUMS = (f"list_count({_DELTAS}), list_sum(list_transform({_DELTAS}, d -> exp(d))), "
                    f"list_max(list_transform({_DELTAS}, d -> exp(d))), "
                    f"list_count(list_filter({_DELTAS}, d -> d > 1)), list_sum({_K3})")


def derive_nodes(con, sources: dict[int, Source], staged: Staged, round_paths: dict[int, str | None]) -> None:
    """What node sources (batch key -> source) imply beyond their sibling groups and
    task-rounds (`derive.refresh_sibling_groups`, `derive.mark_node_files`): their rounds, one
    statement for them all, and each one's errors. `round_paths`: batch key -> its round's
    directory."""
    derive.upsert_rounds(con, [(source.run_id, source.round, round_paths[key]) for key, source in sources.items()])
    for key, source in sources.items():
        record_errors(con, source, staged.reasons(key))


def land_summary(con, source: Source, key: int, staged: Staged, round_path: str | None) -> None:
    """A task-round summary -> the summary fields of its task_rounds row."""
    row = con.execute(f"SELECT {', '.join(qi(c) for c in SUMMARY_COLUMNS)} FROM _typed "
                      "WHERE key = ? AND reject_reason IS NULL", [key]).fetchone()
    values = dict(zip(SUMMARY_COLUMNS, row or [None] * len(SUMMARY_COLUMNS)))
    values.update(summary_present=row is not None, summary_source_id=source.source_id)
    derive.upsert_task_round(con, source.run_id, source.round, source.task, values)
    derive.upsert_round(con, source.run_id, source.round, round_path)
    record_errors(con, source, staged.reasons(key))


def land_timing(con, source: Source, key: int, staged: Staged) -> None:
    """timing.jsonl -> steps (one row per line; repeated steps are kept for the checks)."""
    cols = ", ".join(qi(c) for c in STEP_COLUMNS)
    con.execute(f"INSERT INTO steps (source_id, line_no, run_id, {cols}) "
                f"SELECT ?, line_no, ?, {cols} FROM _typed "
                "WHERE key = ? AND reject_reason IS NULL", [source.source_id, source.run_id, key])
    record_errors(con, source, staged.reasons(key))


def land_step_metrics(con, source: Source, key: int, staged: Staged) -> None:
    """step_metrics.jsonl (or the trainer's step) -> step_metrics, one row per run and step:
    a step written again replaces its row, whichever source wrote it (the table keeps no
    source_id); the last line of a step wins within a source."""
    cols = ", ".join(qi(c) for c in STEP_METRIC_COLUMNS)
    good = "FROM _typed WHERE key = ? AND reject_reason IS NULL"
    con.execute(f'DELETE FROM step_metrics WHERE run_id = ? AND step IN (SELECT step {good})',
                [source.run_id, key])
    con.execute(f"INSERT INTO step_metrics (run_id, {cols}) SELECT ?, {cols} {good} "
                "QUALIFY row_number() OVER (PARTITION BY step ORDER BY line_no DESC) = 1",
                [source.run_id, key])
    record_errors(con, source, staged.reasons(key))


def land_wandb_history(con, source: Source, key: int, staged: Staged, wandb_run: str) -> None:
    con.execute("INSERT INTO wandb_history (source_id, line_no, wandb_run, step, row) "
                "SELECT ?, line_no, ?, step, row FROM _typed "
                "WHERE key = ? AND reject_reason IS NULL", [source.source_id, wandb_run, key])
    record_errors(con, source, staged.reasons(key))


def land_wandb_object(con, source: Source, key: int, staged: Staged, wandb_run: str,
                      column: str) -> None:
    """config.json or summary.json -> wandb_runs.config / .summary."""
    row = con.execute("SELECT row FROM _typed WHERE key = ? AND reject_reason IS NULL",
                      [key]).fetchone()
    # not ON CONFLICT: DuckLake has no keys; this reads the same on both engines
    con.execute("INSERT INTO wandb_runs (wandb_run) SELECT ? WHERE NOT EXISTS "
                "(SELECT 1 FROM wandb_runs WHERE wandb_run = ?)", [wandb_run, wandb_run])
    con.execute(f"UPDATE wandb_runs SET {qi(column)} = ?, {qi(column + '_source_id')} = ? "
                "WHERE wandb_run = ?", [row[0] if row else None, source.source_id, wandb_run])
    record_errors(con, source, staged.reasons(key))


def mark_rendered(con, source: Source, flag: str, round_path: str | None) -> None:
    """tree.txt / transcript.md: not row data, only a has_tree / has_transcript flag."""
    derive.upsert_task_round(con, source.run_id, source.round, source.task, {flag: True})
    derive.upsert_round(con, source.run_id, source.round, round_path)
