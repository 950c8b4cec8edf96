"""Reward-model runs (data root 004): the record API a trainer writes through, shared by the ingest.

A reward-model run is one `runs` row of kind `reward_model` plus rows of the `rm_*` tables
(warehouse/schema.py). Its files (docs/reward_model.md) and a trainer's in-memory records
have the same shape: a record is a dict whose keys are the table's columns, and
`warehouse ingest` calls these same functions with the parsed lines of each file, so a run
written by `train rm` and the same run exported (`export_run`) and ingested give the same
rows. Each record kind's fields are declared in `warehouse.vocabulary` (`RM_*_FIELDS`) and
typed by `ingest.normalize`, the SQL normalization every record takes (`typed_rows`). Nothing
here opens or commits a transaction: a caller groups writes atomically in
`warehouse.db.transaction` (as `train.rm.publish` does; on DuckLake it redoes a commit that
lost to another writer's)::

    from ingest.rm_records import (make_receipt, summary_bytes, write_artifacts,
                                   write_budget, write_evaluation, write_jobs, write_run,
                                   write_steps)
    from warehouse.db import connect, transaction

    run = "rm_20261201_0300"
    summary = {"evaluation_id": "final_64", "job": "formal", "phase": "formal",
               "progress": 64, "evaluator": "rewardbench_v1_score", "split": "full",
               "n": 2985, "score": 61.2, "se": 0.95, "sections": {"Chat": 80.0}}

    def write():
        write_run(con, {"run_id": run, "task": "ultrafeedback_bt_rm_rewardbench",
                        "base_model": "tiny", "train_pairs": 512,
                        "reference": {"reference_id": "rb_v1_shipped", "evaluator":
                                      "rewardbench_v1_score", "score": 74.568936}})
        write_jobs(con, run, [{"job": "formal", "phase": "formal", "members": 2}])
        write_steps(con, run, [{"job": "formal", "step": 1, "member": 0, "loss": 0.69,
                    "accuracy": 0.5, "lr": 5e-6, "grad_norm": 1.2, "seconds": 0.8}])
        write_artifacts(con, run, [{"job": "formal", "progress": 64, "path": "ckpt/64",
                        "dtype": "bfloat16", "loadable": True, "retained": True, "members": 2}])
        write_evaluation(con, run, summary,
                         receipt=make_receipt(summary_bytes(summary)))   # finished: official
        write_budget(con, run, {"formal": {"wall_clock_s": 3600, "reserve_s": 600,
                                           "train_s": 2950.0, "stop_reason": "completed"}})

    with connect("duckdb:///warehouse.duckdb") as con:   # at schema head (`warehouse init`)
        transaction(con, write)

Each write is a `sources` row (`source_path`, by default `train://<run>/<file>`); writing the
same source again replaces what the previous write of it wrote, so a trainer may rewrite its
whole step log every step. A malformed record is not raised: it becomes an `ingest_errors`
row naming the source and the record's line (1-based position), as a bad file line would,
and the other records land. `official` is never taken from the caller: it is true exactly
when the receipt's sha256 and size match the summary's bytes.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field

from ingest import derive
from ingest.sources import content_hash, lookup_source_id, open_source, record_errors
from warehouse.vocabulary import RM_PHASES, RM_SPLITS

__all__ = ["RUN_KIND", "QUESTION_ID", "PHASES", "SPLITS", "write_run", "write_jobs",
           "write_steps", "write_artifacts", "write_evaluation", "write_budget",
           "summary_bytes", "make_receipt", "check_receipt", "Written"]

RUN_KIND = "reward_model"
QUESTION_ID = "04-reward-model-rewardbench"
PHASES, SPLITS = RM_PHASES, RM_SPLITS

# keys of a manifest that go to the `runs` row rather than rm_runs.extra
RUNS_KEYS = ("run_id", "kind", "question_id", "seed", "notes", "reference")


class BadRecord(ValueError):
    """A record that cannot land; its message is the ingest_errors reason."""


@dataclass
class Written:
    """What one write landed: rows, and the reasons of the records that did not land."""

    source_id: int
    rows: int = 0
    errors: dict[int, str] = field(default_factory=dict)  # line (1-based) -> reason


# --- records -> rows: through ingest.normalize, as every record kind ---------------------------

def typed_rows(con, kind: str, records: list) -> tuple[list[tuple[int, dict]], dict[int, str]]:
    """(line, typed row) of each record of `kind` that may land (its vocabulary fields, unknown
    keys in `extra`), and the reason of each that may not, by line (1-based position). A
    record may already be the file reader's BadRecord."""
    from ingest import load
    from ingest.lines import RawLines

    raw = RawLines()
    for line_no, record in enumerate(records, start=1):
        raw.add(line_no, *_line(record))
    staged = load.stage(con, kind, [(0, raw)], optimistic=False)
    try:
        cur = con.execute("SELECT * EXCLUDE (key, reject_reason) FROM _typed WHERE reject_reason IS NULL "
                          "ORDER BY line_no")
        names = [d[0] for d in cur.description]
        found = [dict(zip(names, values)) for values in cur.fetchall()]
    finally:
        load.drop_staged(con)
    rows = [(row.pop("line_no"), {**row, "extra": _sorted_json(row["extra"])}) for row in found]
    return rows, dict(staged.errors[0])


def _line(record) -> tuple[str | None, str | None]:
    """(JSON text, None), or (None, the reason it has none)."""
    if isinstance(record, BadRecord):
        return None, str(record)
    try:
        return json.dumps(record, ensure_ascii=False, allow_nan=False), None
    except ValueError:  # NaN or Infinity, which JSON cannot hold
        bad = [k for k, v in record.items() if isinstance(v, float) and not math.isfinite(v)] \
            if isinstance(record, dict) else []
        return None, f"{', '.join(bad) or 'a value'} is not a finite number (NaN or Infinity)"
    except TypeError as exc:
        return None, f"not JSON: {exc}"


def _sorted_json(extra) -> str | None:
    """`extra` as rm rows keep it: keys sorted, `json.dumps`' spacing."""
    if extra is None:
        return None
    return json.dumps(json.loads(extra), sort_keys=True)


def normalize(con, kind: str, record) -> dict:
    """The typed row of one record (BadRecord with the reason when it cannot land)."""
    rows, errors = typed_rows(con, kind, [record])
    if errors:
        raise BadRecord(errors[1])
    return rows[0][1]


def normalize_all(con, kind: str, records: list) -> list[dict]:
    """The typed rows of records that must all land (BadRecord with the first reason if not)."""
    rows, errors = typed_rows(con, kind, records)
    if errors:
        raise BadRecord(errors[min(errors)])
    return [row for _, row in rows]


# --- receipts ---------------------------------------------------------------------------------

def summary_bytes(summary: dict) -> bytes:
    """The bytes a summary file holds when written by this package (receipts hash these)."""
    return (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode("utf-8")


def make_receipt(data: bytes) -> dict:
    """The `.complete` receipt of a summary's bytes: its sha256 and size."""
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def check_receipt(data: bytes, receipt) -> str:
    """'match', 'missing' (receipt None) or 'mismatch' (anything else, a malformed one too)."""
    if receipt is None:
        return "missing"
    want = make_receipt(data)
    if isinstance(receipt, dict) and receipt.get("sha256") == want["sha256"] \
            and receipt.get("size") == want["size"]:
        return "match"
    return "mismatch"


def receipt_mismatch_reason(data: bytes, receipt, receipt_path: str | None) -> str:
    want = make_receipt(data)
    got = (f"sha256 {receipt.get('sha256')!s:.16} size {receipt.get('size')}"
           if isinstance(receipt, dict) else f"not a JSON object ({type(receipt).__name__})")
    where = receipt_path or "the receipt"
    return (f"{where}: receipt does not match its summary (receipt says {got}; the summary "
            f"has sha256 {want['sha256']:.16} size {want['size']}): not trusted, the "
            "evaluation lands as not official")


# --- writes -------------------------------------------------------------------------------------

def write_run(con, manifest: dict, *, source_path: str | None = None, run_dir: str | None = None
              ) -> Written:
    """The run's `runs` row (kind reward_model), its rm_runs row and its reference, if any.

    `manifest` holds run_id, task, agent, base_model, train_pairs, proxy_evaluator,
    final_evaluator, and optionally question_id, seed, notes and `reference` (a dict of
    rm_references columns; its reference_id defaults to `<task>/<evaluator>`).
    """
    run_id = manifest["run_id"]
    source = _open(con, source_path or f"train://{run_id}/manifest.json", "rm_manifest", run_id,
                   manifest)
    try:
        row = normalize(con, "rm_run", {k: v for k, v in manifest.items() if k not in RUNS_KEYS})
        reference = _reference(con, manifest.get("reference"), manifest.get("task"))
    except BadRecord as exc:
        return _failed(con, source, str(exc))
    if reference:
        row["reference_id"] = reference["reference_id"]
        _insert(con, "rm_references", reference, source.source_id, key=("reference_id",))
    _insert(con, "rm_runs", {"run_id": run_id, **row}, source.source_id, key=("run_id",))
    derive.upsert_run(con, {"run_id": run_id, "kind": RUN_KIND,
                            "question_id": manifest.get("question_id", QUESTION_ID),
                            "model": row["base_model"], "seed": manifest.get("seed"),
                            "notes": manifest.get("notes"), "source_path": run_dir})
    return _done(con, source, 1, {})


def _reference(con, raw, task) -> dict | None:
    if raw is None:
        return None
    row = normalize(con, "rm_reference", raw)
    row["task"] = row["task"] or task
    row["reference_id"] = row["reference_id"] or f"{row['task']}/{row['evaluator']}"
    row.pop("extra")
    return row


def write_jobs(con, run_id: str, jobs: list, *, source_path: str | None = None,
               line_nos: list[int] | None = None) -> Written:
    """Training jobs: each exploration unit's runs and the formal replay (rm_jobs)."""
    return _write_lines(con, "rm_jobs", "jobs", "rm_job", run_id, jobs,
                        source_path or f"train://{run_id}/jobs.jsonl", line_nos)


def write_steps(con, run_id: str, steps: list, *, source_path: str | None = None,
                line_nos: list[int] | None = None) -> Written:
    """Per-step training rows (rm_steps): loss, accuracy, lr, grad norm, seconds, memory."""
    return _write_lines(con, "rm_steps", "steps", "rm_step", run_id, steps,
                        source_path or f"train://{run_id}/steps.jsonl", line_nos)


def write_artifacts(con, run_id: str, artifacts: list, *, source_path: str | None = None,
                    line_nos: list[int] | None = None) -> Written:
    """Artifacts (snapshots) by progress, retained or not (rm_artifacts), in publishing order."""
    return _write_lines(con, "rm_artifacts", "artifacts", "rm_artifact", run_id, artifacts,
                        source_path or f"train://{run_id}/artifacts.jsonl", line_nos)


def write_budget(con, run_id: str, phases: dict, *, source_path: str | None = None) -> Written:
    """The outcome's budget facts, one rm_budgets row per phase (`{"formal": {...}}`)."""
    source = _open(con, source_path or f"train://{run_id}/outcome.json", "rm_outcome", run_id,
                   phases)
    try:
        if not isinstance(phases, dict) or not phases:
            raise BadRecord("outcome must map each phase (exploration, formal) to its facts")
        rows = [{"run_id": run_id, "phase": _phase(p), **facts}
                for p, facts in zip(phases, normalize_all(con, "rm_budget", list(phases.values())))]
    except BadRecord as exc:
        return _failed(con, source, str(exc))
    for row in rows:
        _insert(con, "rm_budgets", row, source.source_id, key=("run_id", "phase"))
    return _done(con, source, len(rows), {})


def _phase(phase) -> str:
    if phase not in PHASES:
        raise BadRecord(f"phase {phase!r} is not one of {', '.join(PHASES)}")
    return phase


def write_evaluation(con, run_id: str, summary: dict, *, receipt=None,
                     data: bytes | None = None, source_path: str | None = None,
                     receipt_path: str | None = None) -> Written:
    """One evaluation summary (rm_evaluations) and its section scores (rm_eval_sections).

    `data` are the summary's bytes as stored (default: `summary_bytes(summary)`); `receipt`
    the parsed `.complete` receipt or None when there is none. The row is official exactly
    when the receipt's sha256 and size match `data`; a mismatch is also an ingest_errors row
    (line 0, the receipt's path), so it is reported and never trusted.
    """
    data = summary_bytes(summary) if data is None else data
    digest_input = data + b"\0" + json.dumps(receipt, sort_keys=True).encode("utf-8")
    path = source_path or f"train://{run_id}/evaluations/{summary.get('evaluation_id')}.json"
    source = _open(con, path, "rm_evaluation", run_id, None, digest=content_hash(digest_input))
    try:
        row = normalize(con, "rm_evaluation", summary)
        sections = _sections(con, summary.get("sections"))
    except BadRecord as exc:
        return _failed(con, source, str(exc))
    status = check_receipt(data, receipt)
    row.update(run_id=run_id, official=status == "match", receipt_status=status,
               summary_path=path, summary_sha256=make_receipt(data)["sha256"],
               summary_size=len(data), receipt_path=receipt_path if receipt is not None else None,
               receipt_sha256=_get(receipt, "sha256", str), receipt_size=_get(receipt, "size", int))
    row["extra"] = _drop_key(row["extra"], "sections")
    _insert(con, "rm_evaluations", row, source.source_id, key=("run_id", "evaluation_id"))
    con.execute('DELETE FROM "rm_eval_sections" WHERE "run_id" = ? AND "evaluation_id" = ?',
                [run_id, row["evaluation_id"]])
    for name, (score, n) in sections.items():
        _insert(con, "rm_eval_sections", {"run_id": run_id, "evaluation_id":
                row["evaluation_id"], "section": name, "score": score, "n": n}, source.source_id)
    errors = ({0: receipt_mismatch_reason(data, receipt, receipt_path)}
              if status == "mismatch" else {})
    return _done(con, source, 1, errors)


def _sections(con, raw) -> dict[str, tuple[float | None, int | None]]:
    """`{"Chat": 80.2}` or `{"Chat": {"score": 80.2, "n": 358}}` -> name -> (score, n)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise BadRecord("sections must map a section name to its score")
    values = [value if isinstance(value, dict) else {"score": value} for value in raw.values()]
    rows = normalize_all(con, "rm_section", values) if values else []
    return {name: (row["score"], row["n"]) for name, row in zip(raw, rows)}


def _get(receipt, key: str, kind: type):
    value = receipt.get(key) if isinstance(receipt, dict) else None
    return value if isinstance(value, kind) and not isinstance(value, bool) else None


def _drop_key(extra: str | None, key: str) -> str | None:
    if extra is None:
        return None
    rest = {k: v for k, v in json.loads(extra).items() if k != key}
    return json.dumps(rest, sort_keys=True) if rest else None


# --- sources and inserts ------------------------------------------------------------------------

def _write_lines(con, table: str, kind: str, record_kind: str, run_id: str, records: list,
                 source_path: str, line_nos: list[int] | None) -> Written:
    """Records (one per line) into `table` under one source; bad ones become errors."""
    line_nos = line_nos or list(range(1, len(records) + 1))
    source = _open(con, source_path, f"rm_{kind}", run_id, records)
    typed, reasons = typed_rows(con, record_kind, records) if records else ([], {})
    rows = [{"line_no": line_nos[at - 1], "run_id": run_id, **row} for at, row in typed]
    errors = {line_nos[at - 1]: reason for at, reason in sorted(reasons.items())}
    if table == "rm_jobs":
        rows, errors = _unique_jobs(rows, errors)
    for row in rows:
        _insert(con, table, row, source.source_id)
    return _done(con, source, len(rows), errors)


def _unique_jobs(rows: list[dict], errors: dict) -> tuple[list[dict], dict]:
    seen: dict[str, int] = {}
    kept = []
    for row in rows:
        if row["job"] in seen:
            errors[row["line_no"]] = (f"duplicate job {row['job']!r} (first on line "
                                      f"{seen[row['job']]})")
            continue
        seen[row["job"]] = row["line_no"]
        kept.append(row)
    return kept, errors


def _open(con, path: str, kind: str, run_id: str, payload, *, digest: str | None = None,
          size: int | None = None, mtime_ns: int | None = None):
    """A fresh `sources` row for `path`, the rows of an earlier write of it deleted."""
    source_id, existed = lookup_source_id(con, path)
    if digest is None:
        digest = content_hash(json.dumps(payload, sort_keys=True, default=str).encode("utf-8"))
    return open_source(con, source_id=source_id, existed=existed, path=path, kind=kind,
                       run_id=run_id, size_bytes=size, mtime_ns=mtime_ns, digest=digest)


def _insert(con, table: str, row: dict, source_id: int, key: tuple[str, ...] = ()) -> None:
    """Insert `row`; with `key`, first delete the row of that key, whichever source wrote it
    (a trainer may write the same evaluation or phase again under another source path)."""
    row = {**row, "source_id": source_id}
    if key:
        where = " AND ".join(f'"{k}" = ?' for k in key)
        con.execute(f'DELETE FROM "{table}" WHERE {where}', [row[k] for k in key])
    cols = ", ".join(f'"{c}"' for c in row)
    marks = ", ".join("?" for _ in row)
    con.execute(f'INSERT INTO "{table}" ({cols}) VALUES ({marks})', list(row.values()))


def _done(con, source, rows: int, errors: dict[int, str]) -> Written:
    con.execute("UPDATE sources SET rows = ?, rows_rejected = ? WHERE source_id = ?",
                [rows, len(errors), source.source_id])
    record_errors(con, source, errors)
    return Written(source.source_id, rows, errors)


def _failed(con, source, reason: str) -> Written:
    """The whole record is unusable: no rows, one line-0 error naming why."""
    return _done(con, source, 0, {0: reason})
