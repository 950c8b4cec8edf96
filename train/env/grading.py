"""Grading a node's submission: validity, the competition metric, medal and humanrank.

Medal thresholds follow MLE-bench exactly (openai/mle-bench, ``mlebench/grade_helpers.py``,
``Grader.rank_score``, which cites kaggle.com/progression): with N teams on the leaderboard,
sorted best first and positions 1-based,

- N < 100:         gold = pos max(1, int(0.1 N)), silver = max(1, int(0.2 N)), bronze = max(1, int(0.4 N))
- 100 <= N < 250:  gold = 10,                     silver = max(1, int(0.2 N)), bronze = max(1, int(0.4 N))
- 250 <= N < 1000: gold = 10 + int(0.002 N),      silver = 50,                 bronze = 100
- N >= 1000:       gold = 10 + int(0.002 N),      silver = max(1, int(0.05 N)), bronze = max(1, int(0.1 N))

A score wins a medal when it is at least as good as the score at that position (ties win);
"above median" is strict. Scores are rounded to 5 decimals first, as MLE-bench does.

Humanrank (the reward of an ok node) is the submission's percentile among the N human teams:

    humanrank = (teams strictly worse + 0.5 * teams with an equal score) / N

so it lies in [0, 1]: 1.0 beats every team, 0.0 is worse than every team, and a score equal
to every team's gets 0.5. "Equal" means equal after rounding both to 5 decimals.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from train.env.tasks import Task

SCORE_DECIMALS = 5
LOGLOSS_EPS = 1e-15


class InvalidSubmission(Exception):
    """The submission file exists but cannot be scored (shape, ids, columns, values)."""


def accuracy(y_true, pred) -> float:
    import numpy as np

    return float(np.mean(np.asarray(y_true).astype(str) == np.asarray(pred).astype(str)))


def rmse(y_true, pred) -> float:
    import numpy as np

    diff = np.asarray(y_true, dtype=float) - np.asarray(pred, dtype=float)
    return float(np.sqrt(np.mean(diff**2)))


def logloss(y_true, pred) -> float:
    """Multi-class log loss; y_true one-hot (n, k), pred probabilities (n, k), rows renormalised."""
    import numpy as np

    p = np.clip(np.asarray(pred, dtype=float), LOGLOSS_EPS, 1 - LOGLOSS_EPS)  # (n, k)
    p = p / p.sum(axis=1, keepdims=True)
    return float(-np.mean(np.sum(np.asarray(y_true, dtype=float) * np.log(p), axis=1)))


METRICS = {"accuracy": accuracy, "rmse": rmse, "logloss": logloss}
NUMERIC_METRICS = {"rmse", "logloss"}


@dataclass(frozen=True)
class Grade:
    """What the grader says about one node's submission."""

    status: str  # ok | no_submission | invalid_submission
    test_metric: float | None = None
    oriented: float | None = None
    humanrank: float | None = None
    medal: str | None = None  # gold | silver | bronze | None
    above_median: bool = False
    grade_error: str | None = None


def grade_submission(task: Task, submission: Path | None) -> Grade:
    """Grade the CSV at ``submission`` (None or missing: no_submission) against the answers."""
    if submission is None or not Path(submission).is_file():
        return Grade(status="no_submission")
    try:
        score = round(score_submission(task, Path(submission)), SCORE_DECIMALS)
    except InvalidSubmission as exc:
        return Grade(status="invalid_submission", grade_error=str(exc))
    if not math.isfinite(score):
        return Grade(status="invalid_submission", grade_error=f"metric is {score}")
    return place_on_leaderboard(score, task.leaderboard_scores(), task.lower_is_better)


def place_on_leaderboard(score: float, board: list[float], lower_is_better: bool) -> Grade:
    """An ok Grade for ``score``: oriented, humanrank and medal against ``board``."""
    medal, above = medal_for(score, board, lower_is_better)
    return Grade(
        status="ok",
        test_metric=score,
        oriented=-score if lower_is_better else score,
        humanrank=humanrank(score, board, lower_is_better),
        medal=medal,
        above_median=above,
    )


def humanrank(score: float, board: list[float], lower_is_better: bool) -> float:
    """(teams strictly worse + 0.5 * ties) / teams; see the module docstring."""
    if not board:
        raise ValueError("leaderboard is empty")
    mine = round(score, SCORE_DECIMALS)
    theirs = [round(s, SCORE_DECIMALS) for s in board]
    worse = sum(1 for s in theirs if (s > mine if lower_is_better else s < mine))
    ties = sum(1 for s in theirs if s == mine)
    return (worse + 0.5 * ties) / len(theirs)


def medal_thresholds(board: list[float], lower_is_better: bool) -> tuple[float, float, float, float]:
    """(gold, silver, bronze, median) scores for a leaderboard, as MLE-bench computes them."""
    import statistics

    ranked = sorted(board, reverse=not lower_is_better)  # best first
    n = len(ranked)
    if n == 0:
        raise ValueError("leaderboard is empty")
    at = lambda pos: ranked[pos - 1]  # noqa: E731 - 1-based leaderboard position
    if n < 100:
        positions = (max(1, int(n * 0.1)), max(1, int(n * 0.2)), max(1, int(n * 0.4)))
    elif n < 250:
        positions = (10, max(1, int(n * 0.2)), max(1, int(n * 0.4)))
    elif n < 1000:
        positions = (10 + int(n * 0.002), 50, 100)
    else:
        positions = (10 + int(n * 0.002), max(1, int(n * 0.05)), max(1, int(n * 0.1)))
    gold, silver, bronze = (at(p) for p in positions)
    return gold, silver, bronze, statistics.median(ranked)


def medal_for(score: float, board: list[float], lower_is_better: bool) -> tuple[str | None, bool]:
    """(medal or None, strictly above median) for ``score``."""
    gold, silver, bronze, median = medal_thresholds(board, lower_is_better)
    as_good = (lambda t: score <= t) if lower_is_better else (lambda t: score >= t)
    medal = next((name for name, t in (("gold", gold), ("silver", silver), ("bronze", bronze))
                  if as_good(t)), None)
    above = score < median if lower_is_better else score > median
    return medal, above


def score_submission(task: Task, submission: Path) -> float:
    """The raw competition metric; raises InvalidSubmission for anything unscorable."""
    import pandas as pd

    if task.grade_fn is not None:
        return task.grade_fn(_read_csv(submission), pd.read_csv(task.answers_path))
    answers = pd.read_csv(task.answers_path)
    sub = _aligned(_read_csv(submission), answers, task.id_column)
    targets = [c for c in answers.columns if c != task.id_column]
    truth = _by_id(answers, task.id_column)[targets].to_numpy()
    pred = sub[targets].to_numpy()
    if task.metric in NUMERIC_METRICS:
        pred = _as_float(sub[targets])
    if len(targets) == 1:
        truth, pred = truth[:, 0], pred[:, 0]
    return METRICS[task.metric](truth, pred)


def _read_csv(path: Path):
    import pandas as pd

    try:
        return pd.read_csv(path)
    except Exception as exc:  # noqa: BLE001 - any parse failure makes the file invalid
        raise InvalidSubmission(f"submission.csv is not a readable CSV: {exc}") from None


def _aligned(sub, answers, id_column: str):
    """The submission with answers' columns and ids, sorted by id; else InvalidSubmission."""
    if set(sub.columns) != set(answers.columns):
        raise InvalidSubmission(
            f"columns {sorted(map(str, sub.columns))} != expected {sorted(answers.columns)}")
    if len(sub) != len(answers):
        raise InvalidSubmission(f"{len(sub)} rows, expected {len(answers)}")
    if sub[id_column].duplicated().any():
        raise InvalidSubmission(f"duplicate values in {id_column!r}")
    if set(sub[id_column].astype(str)) != set(answers[id_column].astype(str)):
        raise InvalidSubmission(f"{id_column!r} values do not match the test set")
    if sub.isna().any().any():
        raise InvalidSubmission("submission has missing values")
    return _by_id(sub, id_column)


def _by_id(frame, id_column: str):
    """Rows ordered by the id's text, so int and str ids of the same rows line up."""
    order = frame[id_column].astype(str).argsort(kind="stable")
    return frame.iloc[order].reset_index(drop=True)


def _as_float(frame):
    import numpy as np
    import pandas as pd

    try:
        values = frame.apply(pd.to_numeric).to_numpy(dtype=float)
    except (ValueError, TypeError) as exc:
        raise InvalidSubmission(f"predictions must be numeric: {exc}") from None
    if not np.isfinite(values).all():
        raise InvalidSubmission("predictions must be finite")
    return values
