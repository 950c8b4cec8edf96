"""Tasks: competition directories in MLE-bench's layout.

A task directory ``<root>/<slug>/`` holds

- ``description.md``               what the solution must do
- ``public/``                      train/test files and ``sample_submission.csv`` (the only
                                   thing copied into a node's workspace)
- ``private/answers.csv``          the answers, never visible to a node
- ``leaderboard.csv``              the human teams' scores (column ``score``)
- ``grader.toml``                  ``metric``, ``direction`` (higher|lower), ``id_column``,
                                   ``answers`` (file name under private/)

A real MLE-bench competition, prepared by ``mlebench prepare``, keeps ``public/`` and
``private/`` under ``prepared/``; both are accepted. Without a ``grader.toml``, a
``config.yaml`` from MLE-bench's competition registry is read instead: its ``grader.name``
when it is one of our built-in metrics, else its ``grader.grade_fn`` (needs ``mlebench``
installed), with the direction read from the leaderboard's order as MLE-bench does.
"""
from __future__ import annotations

import csv
import functools
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from train.env.errors import TaskLayoutError, TaskNotFoundError

BUNDLED_ROOT = Path(__file__).resolve().parent.parent / "tasks"
TASKS_ROOT_ENV = "TRAIN_TASKS_ROOT"
METRIC_ALIASES = {"accuracy": "accuracy", "rmse": "rmse", "logloss": "logloss",
                  "log-loss": "logloss", "log_loss": "logloss", "multi-class-log-loss": "logloss"}


@dataclass(frozen=True)
class Task:
    """One competition: where its files are and how it is graded."""

    name: str
    root: Path
    public_dir: Path
    private_dir: Path
    metric: str
    lower_is_better: bool
    id_column: str = "id"
    answers_file: str = "answers.csv"
    grade_fn: Callable[[Any, Any], float] | None = field(default=None, compare=False)

    @property
    def answers_path(self) -> Path:
        return self.private_dir / self.answers_file

    @property
    def description(self) -> str:
        return (self.root / "description.md").read_text()

    def leaderboard_scores(self) -> list[float]:
        return _leaderboard_scores(self.root / "leaderboard.csv")


def bundled_task_names() -> list[str]:
    """Slugs of the mini-competitions shipped in ``train/tasks/``."""
    return sorted(p.name for p in BUNDLED_ROOT.iterdir() if (p / "grader.toml").is_file())


def load_task(name: str, tasks_root: str | Path | None = None) -> Task:
    """The task ``name`` from ``tasks_root`` (else $TRAIN_TASKS_ROOT, else the bundled tasks)."""
    root = Path(tasks_root or os.environ.get(TASKS_ROOT_ENV) or BUNDLED_ROOT)
    task_dir = root / name
    if not task_dir.is_dir():
        known = ", ".join(_names_under(root)) or "none"
        raise TaskNotFoundError(
            f"No task {name!r} under {root}. Known tasks: {known}. Use --tasks-root DIR for others.")
    prepared = task_dir / "prepared" if (task_dir / "prepared" / "public").is_dir() else task_dir
    for needed in (prepared / "public", prepared / "private", task_dir / "leaderboard.csv"):
        if not needed.exists():
            raise TaskLayoutError(f"Task {name!r} has no {needed.relative_to(root)}; see train/env/tasks.py for the layout.")
    grader = _grader_config(task_dir)
    return Task(name=name, root=task_dir, public_dir=prepared / "public",
                private_dir=prepared / "private", **grader)


def describe_tasks(tasks_root: str | Path | None = None) -> list[str]:
    """One line per task: slug, metric and direction, leaderboard size."""
    root = Path(tasks_root or os.environ.get(TASKS_ROOT_ENV) or BUNDLED_ROOT)
    lines = []
    for name in _names_under(root):
        task = load_task(name, root)
        direction = "lower is better" if task.lower_is_better else "higher is better"
        lines.append(f"{name}\t{task.metric} ({direction})\t{len(task.leaderboard_scores())} teams")
    return lines


def _names_under(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def _grader_config(task_dir: Path) -> dict:
    toml_path = task_dir / "grader.toml"
    if toml_path.is_file():
        raw = tomllib.loads(toml_path.read_text())
        metric = METRIC_ALIASES.get(raw["metric"])
        if metric is None:
            raise TaskLayoutError(f"{toml_path}: unknown metric {raw['metric']!r}; use one of {sorted(METRIC_ALIASES)}.")
        return {"metric": metric, "lower_is_better": raw.get("direction") == "lower",
                "id_column": raw.get("id_column", "id"), "answers_file": raw.get("answers", "answers.csv")}
    if (task_dir / "config.yaml").is_file():
        return _mlebench_grader(task_dir)
    raise TaskLayoutError(f"Task {task_dir.name!r} has neither grader.toml nor config.yaml.")


def _mlebench_grader(task_dir: Path) -> dict:
    """Grader settings from an MLE-bench registry ``config.yaml``."""
    import yaml

    config = yaml.safe_load((task_dir / "config.yaml").read_text())
    grader = config.get("grader", {})
    board = _leaderboard_scores(task_dir / "leaderboard.csv")
    lower = bool(board and board[0] < board[-1])  # MLE-bench: best team is listed first
    answers = Path(config.get("dataset", {}).get("answers", "answers.csv")).name
    metric = METRIC_ALIASES.get(str(grader.get("name", "")).lower())
    if metric is not None:
        return {"metric": metric, "lower_is_better": lower, "answers_file": answers}
    return {"metric": grader.get("name", "custom"), "lower_is_better": lower,
            "answers_file": answers, "grade_fn": _import_grade_fn(grader.get("grade_fn", ""))}


def _import_grade_fn(spec: str) -> Callable:
    import importlib

    module, _, fn = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), fn)
    except (ImportError, AttributeError, ValueError) as exc:
        raise TaskLayoutError(
            f"Cannot import grade_fn {spec!r} ({exc}). Install mlebench or add a grader.toml.") from None


@functools.lru_cache(maxsize=64)
def _leaderboard_scores(path: Path) -> list[float]:
    with open(path, newline="") as fh:
        scores = [float(row["score"]) for row in csv.DictReader(fh) if row.get("score") not in (None, "")]
    if not scores:
        raise TaskLayoutError(f"{path} has no scores.")
    return scores
