"""The data-root layout of a reward-model run (docs/reward_model.md), and its export.

    ROOT/<run_id>/manifest.json                     run identity, task, evaluators, reference
    ROOT/<run_id>/outcome.json                      {"phases": {"exploration": {...}, "formal": {...}}}
    ROOT/<run_id>/jobs.jsonl                        one training job per line (units, formal replay)
    ROOT/<run_id>/artifacts.jsonl                   one artifact per line, in publishing order
    ROOT/<run_id>/steps.jsonl                       one optimizer step per line (optional)
    ROOT/<run_id>/evaluations/<evaluation_id>.json  one evaluation summary
    ROOT/<run_id>/evaluations/<evaluation_id>.complete   its receipt: {"sha256": ..., "size": ...}

A directory holding `manifest.json` is a reward-model run. `export_run` writes this layout
from the warehouse's rows (what `train rm --export-root` calls); `warehouse ingest` of the
result gives the same rows. `write_evaluation_files` writes one summary and, only for a
finished evaluation, its receipt: a trainer calls it as each evaluation completes.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ingest.rm_records import make_receipt, summary_bytes
from warehouse import vocabulary as vocab

__all__ = ["MANIFEST", "OUTCOME", "JOBS", "ARTIFACTS", "STEPS", "EVALUATIONS", "RECEIPT_SUFFIX",
           "export_run", "write_evaluation_files", "write_json", "write_jsonl"]

MANIFEST, OUTCOME = "manifest.json", "outcome.json"
JOBS, ARTIFACTS, STEPS = "jobs.jsonl", "artifacts.jsonl", "steps.jsonl"
EVALUATIONS, RECEIPT_SUFFIX = "evaluations", ".complete"


def receipt_path(summary_path: str | os.PathLike) -> Path:
    """`evaluations/<id>.json` -> `evaluations/<id>.complete`."""
    path = Path(summary_path)
    return path.with_suffix(RECEIPT_SUFFIX)


def write_evaluation_files(run_dir: str | os.PathLike, summary: dict, *, complete: bool = True
                           ) -> tuple[Path, Path | None]:
    """Write `evaluations/<evaluation_id>.json`; with `complete`, then its receipt.

    The receipt is written after the summary (and atomically, by rename), so a receipt on
    disk always means the summary it names was fully written first.
    """
    folder = Path(run_dir) / EVALUATIONS
    folder.mkdir(parents=True, exist_ok=True)
    data = summary_bytes(summary)
    path = folder / f"{summary['evaluation_id']}.json"
    _atomic_write(path, data)
    if not complete:
        return path, None
    receipt = receipt_path(path)
    _atomic_write(receipt, (json.dumps(make_receipt(data)) + "\n").encode("utf-8"))
    return path, receipt


def write_json(path: Path, obj) -> None:
    _atomic_write(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def write_jsonl(path: Path, records: list[dict]) -> None:
    _atomic_write(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
                  .encode("utf-8"))


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# --- export from the warehouse ------------------------------------------------------------------

def export_run(con, run_id: str, root: str | os.PathLike) -> Path:
    """Write run `run_id`'s layout under `root` from the warehouse (a DuckDB connection).

    Receipts are written only for evaluations that are official in the warehouse; an
    evaluation that was not stays without one, so ingesting the export keeps it unofficial.
    """
    from warehouse.errors import TerminalError

    run = _rows(con, 'SELECT * FROM "rm_runs" WHERE "run_id" = ?', run_id)
    if not run:
        raise TerminalError(f"no reward-model run {run_id!r} in the warehouse (rm_runs)")
    run_dir = Path(root) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / MANIFEST, _manifest(con, run[0]))
    phases = _rows(con, 'SELECT * FROM "rm_budgets" WHERE "run_id" = ? ORDER BY "phase"', run_id)
    if phases:
        write_json(run_dir / OUTCOME, {"phases": {p["phase"]: _record(p, vocab.RM_BUDGET_FIELDS)
                                                  for p in phases}})
    for name, table, fields in ((JOBS, "rm_jobs", vocab.RM_JOB_FIELDS),
                                (ARTIFACTS, "rm_artifacts", vocab.RM_ARTIFACT_FIELDS),
                                (STEPS, "rm_steps", vocab.RM_STEP_FIELDS)):
        rows = _rows(con, f'SELECT * FROM "{table}" WHERE "run_id" = ? '
                          'ORDER BY "source_id", "line_no"', run_id)
        if rows:
            write_jsonl(run_dir / name, [_record(r, fields) for r in rows])
    for evaluation in _rows(con, 'SELECT * FROM "rm_evaluations" WHERE "run_id" = ? '
                                 'ORDER BY "evaluation_id"', run_id):
        summary = _record(evaluation, vocab.RM_EVALUATION_FIELDS)
        sections = _rows(con, 'SELECT "section", "score", "n" FROM "rm_eval_sections" WHERE '
                              '"run_id" = ? AND "evaluation_id" = ? ORDER BY "section"',
                         run_id, evaluation["evaluation_id"])
        if sections:
            summary["sections"] = {s["section"]: _record(s, vocab.RM_SECTION_FIELDS)
                                   for s in sections}
        write_evaluation_files(run_dir, summary, complete=bool(evaluation["official"]))
    return run_dir


def _manifest(con, run: dict) -> dict:
    runs = _rows(con, 'SELECT "question_id", "seed", "notes" FROM "runs" WHERE "run_id" = ?',
                 run["run_id"])
    manifest = {"run_id": run["run_id"], "kind": "reward_model", **_record(run, vocab.RM_RUN_FIELDS),
                **_record(runs[0] if runs else {}, ("question_id", "seed", "notes"))}
    if run["reference_id"]:
        ref = _rows(con, 'SELECT * FROM "rm_references" WHERE "reference_id" = ?',
                    run["reference_id"])
        if ref:
            manifest["reference"] = _record(ref[0], vocab.RM_REFERENCE_FIELDS)
    return manifest


def _record(row: dict, fields: tuple) -> dict:
    """The row's non-NULL fields (vocabulary Fields or column names), plus whatever its `extra`
    kept (nothing is lost)."""
    keys = [f if isinstance(f, str) else f.key for f in fields]
    out = {k: row[k] for k in keys if row.get(k) is not None}
    extra = row.get("extra")
    if extra:
        out.update(json.loads(extra) if isinstance(extra, str) else extra)
    return out


def _rows(con, sql: str, *params) -> list[dict]:
    cur = con.execute(sql, list(params))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]
