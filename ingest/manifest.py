"""Run metadata that lives outside a data root: arm, kind, question, lineage, W&B run name.

The package ships one TOML manifest per published root (`ingest/manifests/*.toml`, keyed by
run id), so ingesting either real root needs no flags; `--manifest FILE` adds or overrides
runs. Format (docs/ingest.md)::

    question_id = "09-multitask-humanrank"      # default for every run below
    model = "qwen3_5_27b"                       # default for every run below

    [runs."20260720_160605_27b_m4hr24ku6b"]     # the run directory's name
    arm = "hr24k_u6b"                           # a registered arm (warehouse/arms.py)
    kind = "training"                           # training | probe | smoke | stress | unknown
    wandb_run = "tree_grpo_27b_mix4_hr24k_u6b"
    resumed_from = { run = "20260720_041422_27b_m4hr24ku6", step = 10 }
    lost = false                                # true: the directory is known to be gone
    overrides = { learning_rate = 3e-5 }        # per-run settings that differ from the arm
    settings_sources = { learning_rate = "--set" }  # where each came from (train run writes it)
    seed = 0
    notes = "..."
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

from warehouse.errors import TerminalError

SHIPPED_DIR = Path(__file__).resolve().parent / "manifests"
KINDS = ("training", "probe", "smoke", "stress", "reward_model", "unknown")
RUN_KEYS = {"arm", "kind", "wandb_run", "resumed_from", "lost", "model", "notes", "overrides",
            "question_id", "seed", "settings_sources"}
TOP_KEYS = {"question_id", "model", "runs"}


def load_file(path: str | os.PathLike) -> dict[str, dict]:
    """Run id -> entry for one manifest file; a clear error names the file and the fix."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TerminalError(f"cannot read manifest {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TerminalError(f"manifest {path} is not valid TOML: {exc}") from None
    unknown = set(doc) - TOP_KEYS
    if unknown:
        raise TerminalError(f"manifest {path}: unknown top-level key(s) {sorted(unknown)}; "
                            f"allowed: {sorted(TOP_KEYS)}")
    defaults = {"question_id": doc.get("question_id"), "model": doc.get("model")}
    return {str(run_id): _entry(path, str(run_id), raw, defaults)
            for run_id, raw in doc.get("runs", {}).items()}


def _entry(path: Path, run_id: str, raw: dict, defaults: dict) -> dict:
    where = f"manifest {path} [runs.\"{run_id}\"]"
    if not isinstance(raw, dict):
        raise TerminalError(f"{where} must be a table of run settings")
    unknown = set(raw) - RUN_KEYS
    if unknown:
        raise TerminalError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: "
                            f"{sorted(RUN_KEYS)}")
    kind = raw.get("kind", "training")
    if kind not in KINDS:
        raise TerminalError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    _check_arm(where, raw.get("arm"))
    return {
        "question_id": raw.get("question_id", defaults["question_id"]),
        "arm": raw.get("arm"), "kind": kind, "wandb_run": raw.get("wandb_run"),
        "resumed_from": _resumed_from(where, raw.get("resumed_from")),
        "lost": bool(raw.get("lost", False)), "model": raw.get("model", defaults["model"]),
        "notes": raw.get("notes"), "overrides": raw.get("overrides") or None,
        "settings_sources": raw.get("settings_sources") or None,
        "seed": raw.get("seed"), "manifest": str(path),
    }


def _check_arm(where: str, arm) -> None:
    if arm is None:
        return
    from warehouse.arms import ARMS

    known = [a.name for a in ARMS]
    if arm not in known:
        raise TerminalError(f"{where}: unknown arm {arm!r}; register it in warehouse/arms.py "
                            f"or use one of: {', '.join(known)}")


def _resumed_from(where: str, value) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict) or "run" not in value:
        raise TerminalError(f"{where}: resumed_from must look like "
                            "{ run = \"<run id>\", step = 10 }")
    step = value.get("step")
    if step is not None and not isinstance(step, int):
        raise TerminalError(f"{where}: resumed_from.step must be an integer, got {step!r}")
    return {"run": str(value["run"]), "step": step}


def shipped_files() -> list[Path]:
    return sorted(SHIPPED_DIR.glob("*.toml"))


def load_shipped() -> dict[str, dict]:
    """Every run of the shipped manifests (run id -> entry)."""
    merged: dict[str, dict] = {}
    for path in shipped_files():
        merged.update(load_file(path))
    return merged


def load_manifests(extra: list[str | os.PathLike] | tuple = ()) -> dict[str, dict]:
    """The shipped manifests, then each `--manifest FILE` in order (later files win)."""
    merged = load_shipped()
    for path in extra:
        merged.update(load_file(path))
    return merged


def infer_entry(run_id: str) -> dict:
    """The entry of a run no manifest names: kind from the name prefix, arm unknown."""
    kind = "unknown"
    for prefix in ("probe", "smoke", "stress"):
        if run_id.startswith(prefix):
            kind = prefix
    return {"question_id": None, "arm": None, "kind": kind, "wandb_run": None,
            "resumed_from": None, "lost": False, "model": None, "notes": None,
            "overrides": None, "settings_sources": None, "seed": None, "manifest": None}
