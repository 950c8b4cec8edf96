"""The step's metrics in the warehouse's `step_metrics` table (one row per run and step)."""
from __future__ import annotations

import json

COLUMNS = ("loss", "pg_loss", "kl", "clip_frac", "grad_norm", "entropy", "tokens",
           "micro_batches", "peak_mem_gib", "lr")


def step_metrics_row(run_id: str, step: int, metrics: dict) -> dict:
    """Typed columns for the known metrics; every other key in `extra` (JSON)."""
    row = {"run_id": run_id, "step": step, **{c: metrics.get(c) for c in COLUMNS}}
    extra = {k: v for k, v in metrics.items() if k not in COLUMNS}
    row["extra"] = json.dumps(extra) if extra else None
    return row


def write_step_metrics(con, run_id: str, step: int, metrics: dict) -> None:
    """Insert or replace the (run_id, step) row."""
    row = step_metrics_row(run_id, step, metrics)
    names = ", ".join(f'"{k}"' for k in row)
    marks = ", ".join("?" for _ in row)
    # delete, then insert, rather than INSERT OR REPLACE: DuckLake has no primary keys
    con.execute('DELETE FROM "step_metrics" WHERE run_id = ? AND step = ?', [run_id, step])
    con.execute(f'INSERT INTO "step_metrics" ({names}) VALUES ({marks})', list(row.values()))
