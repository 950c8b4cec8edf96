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

from train.env.metrics import METRICS

if TYPE_CHECKING:
    from train.env.tasks import Task

SCORE_DECIMALS = 5
# Only an empty cell is missing: text-normalization's tokens include "NA", "null" and "nan",
# which stay text. (mlebench.utils.read_csv asks for float_precision="round_trip", which
# pandas 3 deprecates as its default; scores are rounded to 5 decimals either way.)
CSV_OPTIONS = {"keep_default_na": False, "na_values": [""]}
PROBABILITY_ROW_TOLERANCE = 1e-6  # spooky-author-identification's grade.py ``tolerance``
# Competitions whose grade.py refuses probability rows that do not sum to one; elsewhere a
# multi-class log loss renormalises them.
ROW_SUM_CHECKED = {"spooky-author-identification"}


class InvalidSubmission(Exception):
    """The submission file exists but cannot be scored (shape, ids, columns, values)."""


# The metrics themselves (scikit-learn's, as in MLE-bench's grade.py): train.env.metrics.
NUMERIC_METRICS = {"rmse", "logloss", "roc_auc", "mean_columnwise_roc_auc"}
PROBABILITY_METRICS = {"logloss", "roc_auc"}  # MLE-bench refuses values outside [0, 1]
EXACT_COLUMN_METRICS = {"logloss", "mean_columnwise_roc_auc"}  # extra columns are refused


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
        score = round(float(score_submission(task, Path(submission))), SCORE_DECIMALS)
    except InvalidSubmission as exc:
        return Grade(status="invalid_submission", grade_error=str(exc))
    except Exception as exc:  # noqa: BLE001 - a metric or grade_fn error is the submission's
        # MLE-bench's Grader.__call__ likewise turns any grading exception into "no score".
        return Grade(status="invalid_submission", grade_error=f"grader failed: {type(exc).__name__}: {exc}")
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

    sub = _read_csv(submission)
    answers = pd.read_csv(task.answers_path, **CSV_OPTIONS)
    if task.grade_fn is not None:
        return _run_grade_fn(task.grade_fn, sub, answers)
    targets = list(task.target_columns) or [c for c in answers.columns if c != task.id_column]
    sub = _aligned(sub, answers, task.id_column, targets, exact=task.metric in EXACT_COLUMN_METRICS)
    truth = _by_id(answers, task.id_column)[targets].to_numpy()
    pred = sub[targets].to_numpy()
    if task.metric in NUMERIC_METRICS:
        pred = _as_float(sub[targets])
        truth = truth.astype(float)
    if task.metric in PROBABILITY_METRICS:
        _check_probabilities(pred, rows_sum_to_one=task.name in ROW_SUM_CHECKED)
    if len(targets) == 1:
        truth, pred = truth[:, 0], pred[:, 0]
    return METRICS[task.metric](truth, pred)


def _run_grade_fn(grade_fn, sub, answers) -> float:
    """MLE-bench's own grader; its InvalidSubmissionError is an invalid submission here."""
    try:
        score = grade_fn(sub, answers)
    except Exception as exc:  # mlebench.grade_helpers.InvalidSubmissionError and kin; the rest re-raised
        if type(exc).__name__ == "InvalidSubmissionError":
            raise InvalidSubmission(str(exc)) from None
        raise
    if score is None:
        raise InvalidSubmission("grade_fn returned no score")
    return score


def _check_probabilities(pred, rows_sum_to_one: bool) -> None:
    """MLE-bench's checks: probabilities in [0, 1] (dogs-vs-cats, aerial-cactus, spooky), and
    rows summing to one within 1e-6 (spooky's grade.py)."""
    import numpy as np

    if ((pred < 0) | (pred > 1)).any():
        raise InvalidSubmission("probabilities must lie between 0 and 1")
    if rows_sum_to_one and pred.ndim == 2 and not np.isclose(pred.sum(axis=1), 1, atol=PROBABILITY_ROW_TOLERANCE).all():
        raise InvalidSubmission("each row's probabilities must sum to one")


def _read_csv(path: Path):
    import pandas as pd

    try:
        return pd.read_csv(path, **CSV_OPTIONS)
    except Exception as exc:  # noqa: BLE001 - any parse failure makes the file invalid
        raise InvalidSubmission(f"submission.csv is not a readable CSV: {exc}") from None


def _aligned(sub, answers, id_column: str, targets: list[str], exact: bool):
    """The submission's id and target columns, rows sorted by id; else InvalidSubmission."""
    expected = [id_column, *targets]
    missing = [c for c in expected if c not in sub.columns]
    if missing or (exact and set(sub.columns) != set(expected)):
        raise InvalidSubmission(f"columns {list(map(str, sub.columns))} != expected {expected}")
    if len(sub) != len(answers):
        raise InvalidSubmission(f"{len(sub)} rows, expected {len(answers)}")
    if sub[id_column].duplicated().any():
        raise InvalidSubmission(f"duplicate values in {id_column!r}")
    if set(sub[id_column].astype(str)) != set(answers[id_column].astype(str)):
        raise InvalidSubmission(f"{id_column!r} values do not match the test set")
    if sub[expected].isna().any().any():
        raise InvalidSubmission("submission has missing values")
    return _by_id(sub[expected], id_column)


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
