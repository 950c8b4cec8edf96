"""A run's settings, checkpoints and artifacts, for the run pages' side panels (its life,
run_state's row, is warehouse.run_state.read_life: the HTML report shows it too).

Each function reads on a connection the caller opened (:func:`warehouse.serve.data.reading`).
Settings come from the run row (model, seed, runs.overrides: the knobs the run changed, the
generation backend and its version) over its arm's row (caps, LoRA, learning rate, group
sizes). Each overridden value shows the source `train run` recorded for it in
runs.settings_sources (--set, run, default, flag: train.settings.settings_of); a run without
them (an ingested data root) shows "override". Checkpoints are the steps whose timing row
saved one, at `<checkpoint_dir>/<run_id>/global_step_<N>` (train run records checkpoint_dir),
each checked on disk; artifacts are the adapters the round summaries name and, for a
reward-model run, its published rm_artifacts.
"""
from __future__ import annotations

import json
from pathlib import Path

from warehouse.report import rows
from warehouse.run_state import read_run_row

#: arms columns shown as the run's settings, in this order
ARM_SETTINGS = ("model", "prompt_cap", "response_cap", "total_cap", "siblings_per_expansion",
                "expansions_per_round", "lora_rank", "lora_alpha", "learning_rate", "adv_estimator",
                "gpu_memory_utilization", "mismatch_max", "mismatch_share_gt1_max")
#: overrides keys shown under "generation" rather than "knobs"
GENERATION_KEYS = ("backend", "backend_version", "model_dir")
HIDDEN_KEYS = ("tasks", "checkpoint_dir", "checkpoint_every")


def overrides_of(run: dict | None, column: str = "overrides") -> dict:
    """A JSON object column of the run row (overrides, settings_sources) as a dict; {} when
    absent or not an object."""
    value = (run or {}).get(column)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def settings(con, run_id: str) -> dict[str, list[dict]]:
    """Groups of {key, value, source}: run, arm (as the run saw it), generation, knobs."""
    run = read_run_row(con, run_id)
    overrides = overrides_of(run)
    recorded = overrides_of(run, "settings_sources")

    def source(key: str, unrecorded: str = "override") -> str:
        return str(recorded.get(key, unrecorded))

    arm = (rows(con, 'SELECT * FROM "arms" WHERE "name" = ?', run.get("arm")) or [{}])[0] if run.get("arm") else {}
    groups = {
        "run": [_setting(k, run.get(k), "run") for k in ("arm", "kind", "model", "seed", "question_id", "notes")
                if run.get(k) is not None],
        "arm": [_setting(k, overrides[k] if k in overrides else arm.get(k), source(k) if k in overrides else "arm")
                for k in ARM_SETTINGS if (k in overrides or arm.get(k) is not None)
                and not (k == "model" and run.get("model"))],  # the run's own model is under "run"
        "generation": [_setting(k, overrides[k], source(k, "run")) for k in GENERATION_KEYS if k in overrides],
        "knobs": [_setting(k, v, source(k)) for k, v in sorted(overrides.items())
                  if k not in ARM_SETTINGS and k not in GENERATION_KEYS and k not in HIDDEN_KEYS],
    }
    if "tasks" in overrides:
        groups["run"].append(_setting("tasks", ", ".join(map(str, overrides["tasks"])), source("tasks")))
    return {name: group for name, group in groups.items() if group}


def _setting(key: str, value, source: str) -> dict:
    if isinstance(value, (list, dict)):
        value = json.dumps(value)
    return {"key": key, "value": value, "source": source}


def checkpoints(con, run_id: str) -> list[dict]:
    """One row per step that saved a checkpoint: step, seconds, path (when the run recorded
    its checkpoint_dir) and whether that path exists here."""
    run = read_run_row(con, run_id)
    root = overrides_of(run).get("checkpoint_dir")
    saved = rows(con, 'SELECT "step", max("save_checkpoint_s") AS "seconds" FROM "steps" WHERE "run_id" = ? '
                      'AND "save_checkpoint_s" IS NOT NULL GROUP BY "step" ORDER BY "step"', run_id)
    for row in saved:
        path = Path(root) / run_id / f"global_step_{row['step']}" if root else None
        row["path"] = str(path) if path else None
        row["exists"] = path.is_dir() if path else None
    return saved


def artifacts(con, run_id: str) -> list[dict]:
    """The adapters the round summaries name (first and last round each appears), and a
    reward-model run's published artifacts."""
    found = rows(con, 'SELECT \'adapter\' AS "kind", "adapter_path" AS "path", min("round") AS "first_round", '
                      'max("round") AS "last_round", NULL AS "progress", NULL AS "retained" FROM "task_rounds" '
                      'WHERE "run_id" = ? AND coalesce("adapter_path", \'\') <> \'\' GROUP BY "adapter_path" ORDER BY 3', run_id)
    found += rows(con, 'SELECT coalesce("format", \'artifact\') AS "kind", "path", NULL AS "first_round", '
                       'NULL AS "last_round", "progress", "retained" FROM "rm_artifacts" WHERE "run_id" = ? '
                       'ORDER BY "progress", "job"', run_id)
    return found
