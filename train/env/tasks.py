"""Tasks: competition directories in MLE-bench's layout.

A task directory ``<root>/<slug>/`` holds

- ``description.md``               what the solution must do
- ``public/``                      train/test files and ``sample_submission.csv`` (the only
                                   thing copied into a node's workspace)
- ``private/answers.csv``          the answers, never visible to a node
- ``leaderboard.csv``              the human teams' scores (column ``score``)
- ``grader.toml``                  ``metric``, ``direction`` (higher|lower), and optionally
                                   ``id_column``, ``target_columns``, ``answers`` (file name
                                   under private/)

A real MLE-bench competition, prepared by ``mlebench prepare``, keeps ``public/`` and
``private/`` under ``prepared/``; both are accepted. Without a ``grader.toml``, a
``config.yaml`` from MLE-bench's competition registry is read instead (openai/mle-bench,
``mlebench/competitions/<id>/config.yaml``: ``dataset.answers``, ``dataset.sample_submission``,
``grader.name``, ``grader.grade_fn``), with the direction read from the leaderboard's order as
MLE-bench's ``Grader.is_lower_better`` does. Its ``grade_fn`` is used only when ``mlebench`` is
installed; otherwise the built-in metric that ``grader.name`` (or the competition id) maps to.

The id column and the target columns are the sample submission's: its first column is the
id, the others are what a submission predicts (MLE-bench's convention), unless
``grader.toml`` names them. Answers may hold more columns (spaceship-titanic's private
``test.csv`` keeps every feature); only the sample submission's are graded.
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
from warehouse.config import TASKS_ROOT_ENV

# The bundled tasks' hand-written files (descriptions, graders, solutions) as the package ships
# them; their data, answers included, is generated per install outside it (train.env.bundled).
BUNDLED_ROOT = Path(__file__).resolve().parent.parent / "tasks"
# Our built-in metrics, under the names grader.toml and MLE-bench's registry give them
# (grader.name in mlebench/competitions/<id>/config.yaml).
METRIC_ALIASES = {
    "accuracy": "accuracy",
    "rmse": "rmse", "root_mean_squared_error": "rmse", "root-mean-squared-error": "rmse",
    "logloss": "logloss", "log-loss": "logloss", "log_loss": "logloss",
    "multi-class-log-loss": "logloss", "binary-log-loss": "logloss",
    "roc_auc": "roc_auc", "auc-roc": "roc_auc", "roc-auc": "roc_auc", "auc": "roc_auc",
    "mean_columnwise_roc_auc": "mean_columnwise_roc_auc",
    "mean-column-wise-roc-auc": "mean_columnwise_roc_auc",
}
# The arms' competitions (data roots 000 and 002) and spaceship-titanic, each with the metric of its
# MLE-bench grade.py, so a config.yaml whose grader.name we do not know still grades.
COMPETITION_METRICS = {
    "aerial-cactus-identification": "roc_auc",
    "dogs-vs-cats-redux-kernels-edition": "logloss",
    "text-normalization-challenge-english-language": "accuracy",
    "text-normalization-challenge-russian-language": "accuracy",
    "spooky-author-identification": "logloss",
    "plant-pathology-2020-fgvc7": "mean_columnwise_roc_auc",
    "denoising-dirty-documents": "rmse",
    "spaceship-titanic": "accuracy",
}
LOWER_IS_BETTER = {"rmse": True, "logloss": True}  # when a leaderboard cannot tell
SAMPLE_SUBMISSION_NAMES = ("sample_submission.csv", "sampleSubmission.csv")


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
    target_columns: tuple[str, ...] = ()
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
    root = _root(tasks_root)
    task_dir = root / name
    if not task_dir.is_dir():
        known = ", ".join(_names_under(root)) or "none"
        raise TaskNotFoundError(
            f"No task {name!r} under {root}. Known tasks: {known}. Use --tasks-root DIR for others.")
    prepared = task_dir / "prepared" if (task_dir / "prepared" / "public").is_dir() else task_dir
    for needed in (prepared / "public", prepared / "private", task_dir / "leaderboard.csv"):
        if not needed.exists():
            raise TaskLayoutError(f"Task {name!r} has no {needed.relative_to(root)}; see train/env/tasks.py for the layout.")
    _leaderboard_scores(task_dir / "leaderboard.csv")  # a broken board fails here, not mid-run
    grader = _grader_config(task_dir)
    sample = grader.pop("sample_submission", None)
    columns = _submission_columns(task_dir, prepared, grader, sample)
    return Task(name=name, root=task_dir, public_dir=prepared / "public",
                private_dir=prepared / "private", **{**grader, **columns})


def describe_tasks(tasks_root: str | Path | None = None) -> list[dict]:
    """One row per task directory: its grading, or why it cannot be read (the listing goes on)."""
    root = _root(tasks_root)
    if not root.is_dir():
        raise TaskNotFoundError(f"No tasks root {root}: not a directory.")
    rows = []
    for name in _names_under(root):
        try:
            task = load_task(name, root)
            rows.append({"task": name, "metric": task.metric,
                         "direction": "lower" if task.lower_is_better else "higher",
                         "id_column": task.id_column, "targets": ",".join(task.target_columns),
                         "teams": len(task.leaderboard_scores()), "error": None})
        except Exception as exc:  # noqa: BLE001 - a broken task is listed with its reason
            rows.append({"task": name, "error": f"{type(exc).__name__}: {exc}"})
    return rows


def _root(tasks_root: str | Path | None) -> Path:
    if tasks_root or os.environ.get(TASKS_ROOT_ENV):
        return Path(tasks_root or os.environ[TASKS_ROOT_ENV])
    from train.env.bundled import tasks_root as bundled_tasks_root

    return bundled_tasks_root()


def _names_under(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def _grader_config(task_dir: Path) -> dict:
    toml_path = task_dir / "grader.toml"
    if toml_path.is_file():
        raw = tomllib.loads(toml_path.read_text())
        metric = METRIC_ALIASES.get(raw["metric"])
        if metric is None:
            raise TaskLayoutError(f"{toml_path}: unknown metric {raw['metric']!r}; use one of {sorted(METRIC_ALIASES)}.")
        config = {"metric": metric, "lower_is_better": raw.get("direction") == "lower",
                  "answers_file": raw.get("answers", "answers.csv")}
        if "id_column" in raw:
            config["id_column"] = raw["id_column"]
        if "target_columns" in raw:
            config["target_columns"] = tuple(raw["target_columns"])
        return config
    if (task_dir / "config.yaml").is_file():
        return _mlebench_grader(task_dir)
    raise TaskLayoutError(f"Task {task_dir.name!r} has neither grader.toml nor config.yaml.")


def _mlebench_grader(task_dir: Path) -> dict:
    """Grader settings from an MLE-bench registry ``config.yaml``."""
    import yaml

    path = task_dir / "config.yaml"
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise TaskLayoutError(f"{path} is not valid YAML: {exc}") from None
    grader, dataset = config.get("grader") or {}, config.get("dataset") or {}
    name = str(grader.get("name", ""))
    metric = METRIC_ALIASES.get(name.lower()) or COMPETITION_METRICS.get(str(config.get("id", task_dir.name)))
    settings = {"lower_is_better": _lower_is_better(task_dir, metric),
                "answers_file": Path(dataset.get("answers", "answers.csv")).name,
                "sample_submission": dataset.get("sample_submission")}
    if grader.get("grade_fn") and _mlebench_installed():
        return {**settings, "metric": metric or name, "grade_fn": _import_grade_fn(grader["grade_fn"])}
    if metric is None:
        raise TaskLayoutError(
            f"{path}: grader {name!r} has no built-in equivalent (built-in: "
            f"{', '.join(sorted(set(METRIC_ALIASES.values())))}) and mlebench is not installed to run "
            f"its grade_fn. Install mlebench, or add a grader.toml naming a built-in metric.")
    return {**settings, "metric": metric}


def _lower_is_better(task_dir: Path, metric: str | None) -> bool:
    """MLE-bench's rule: the best team is listed first; a flat board falls back on the metric."""
    board = _leaderboard_scores(task_dir / "leaderboard.csv")
    if board[0] == board[-1]:
        return LOWER_IS_BETTER.get(metric or "", False)
    return board[0] < board[-1]


def _mlebench_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("mlebench") is not None


def _import_grade_fn(spec: str) -> Callable:
    import importlib

    module, _, fn = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), fn)
    except (ImportError, AttributeError, ValueError) as exc:
        raise TaskLayoutError(
            f"Cannot import grade_fn {spec!r} ({exc}). Install mlebench or add a grader.toml.") from None


def _submission_columns(task_dir: Path, prepared: Path, grader: dict, sample: str | None) -> dict:
    """id_column and target_columns: grader.toml's, else the sample submission's header."""
    if "id_column" in grader and "target_columns" in grader:
        return {}
    header = _header(_sample_submission(task_dir, prepared, sample) or prepared / "private" / grader["answers_file"])
    id_column = grader.get("id_column", header[0])
    if id_column not in header:
        raise TaskLayoutError(f"Task {task_dir.name!r}: id column {id_column!r} is not in {header}.")
    targets = grader.get("target_columns") or tuple(c for c in header if c != id_column)
    return {"id_column": id_column, "target_columns": tuple(targets)}


def _sample_submission(task_dir: Path, prepared: Path, configured: str | None) -> Path | None:
    """config.yaml's dataset.sample_submission (relative to the tasks root, as in MLE-bench's
    data dir), else public/sample_submission.csv or public/sampleSubmission.csv."""
    candidates = []
    if configured:
        candidates += [task_dir.parent / configured, task_dir / Path(*Path(configured).parts[1:])]
    candidates += [prepared / "public" / name for name in SAMPLE_SUBMISSION_NAMES]
    return next((p for p in candidates if p.is_file()), None)


def _header(path: Path) -> list[str]:
    if not path.is_file():
        raise TaskLayoutError(f"{path} is missing: cannot tell the submission's columns.")
    with open(path, newline="") as fh:
        header = next(csv.reader(fh), [])
    if len(header) < 2:
        raise TaskLayoutError(f"{path}:1: needs an id column and at least one target column, got {header}.")
    return header


@functools.lru_cache(maxsize=64)
def _leaderboard_scores(path: Path) -> list[float]:
    if not path.is_file():
        raise TaskLayoutError(f"{path} is missing.")
    scores = []
    with open(path, newline="") as fh:
        for line_no, row in enumerate(csv.DictReader(fh), start=2):
            if row.get("score") in (None, ""):
                continue
            try:
                scores.append(float(row["score"]))
            except ValueError:
                raise TaskLayoutError(f"{path}:{line_no}: score {row['score']!r} is not a number.") from None
    if not scores:
        raise TaskLayoutError(f"{path} has no scores.")
    return scores
