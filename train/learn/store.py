"""The step's metrics as the record the warehouse's `step_metrics` table is written from.

The record goes with its round (:class:`train.writer.RoundWrite`), so the round, its timing
row and its metrics commit in one transaction through :func:`ingest.records.load_step_metrics`,
or are spooled together as `step_metrics.jsonl`.
"""
from __future__ import annotations

import math


def step_metrics_record(step: int, metrics: dict) -> dict:
    """`{"step": step, **metrics}`, JSON-safe: a NaN or infinite value is kept as its name
    ("nan", "inf"), so the line stays valid JSON and the value lands in `extra`."""
    return {"step": step, **{k: _safe(v) for k, v in metrics.items() if k != "step"}}


def _safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
