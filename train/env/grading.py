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

A submission is the policy's output, graded by the trainer: it is bounded before it is parsed
(``check_shape``: its size, rows, columns and field lengths against the task's answers), and
a node's submission is graded in a process of its own (``grade_isolated``: a time limit,
an address-space limit), so no file makes the trainer's own process slow or large. A
``grade_error`` is at most ``GRADE_ERROR_CHARS`` long.
"""
from __future__ import annotations

import atexit
import csv
import functools
import io
import json
import math
import os
import pickle
import resource
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from train.env.metrics import METRICS
from warehouse.vocabulary import INVALID_SUBMISSION, NO_SUBMISSION, OK

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


GRADE_ERROR_CHARS = 500
GRADE_TIMEOUT_S = 600.0  # a grader process over it is killed: the submission is invalid
GRADE_MEM_GI = 8.0  # RLIMIT_AS of the grader process, at least; more for large answers
# What a submission may hold, against its task's answers: generous enough for any honest
# file (floats written longer than the answers', extra columns a grader ignores), small
# enough that parsing it costs about what parsing the answers does.
SIZE_FACTOR, SIZE_SLACK = 16, 2**20
ROW_FACTOR, ROW_SLACK = 2, 16
COLUMN_FACTOR, COLUMN_SLACK = 2, 16
FIELD_FACTOR, FIELD_SLACK = 4, 256


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

    def __post_init__(self):
        if self.grade_error is not None and len(self.grade_error) > GRADE_ERROR_CHARS:
            cut = self.grade_error[:GRADE_ERROR_CHARS - 30]
            object.__setattr__(self, "grade_error", f"{cut} ... ({len(self.grade_error):,} chars)")


def grade_submission(task: Task, submission: Path | None) -> Grade:
    """Grade the CSV at ``submission`` (None or missing: no_submission) against the answers."""
    if submission is None or not Path(submission).is_file():
        return Grade(status=NO_SUBMISSION)
    try:
        score = round(float(score_submission(task, Path(submission))), SCORE_DECIMALS)
    except InvalidSubmission as exc:
        return Grade(status=INVALID_SUBMISSION, grade_error=str(exc))
    except Exception as exc:  # noqa: BLE001 - a metric or grade_fn error is the submission's
        # MLE-bench's Grader.__call__ likewise turns any grading exception into "no score".
        return Grade(status=INVALID_SUBMISSION, grade_error=f"grader failed: {type(exc).__name__}: {exc}")
    if not math.isfinite(score):
        return Grade(status=INVALID_SUBMISSION, grade_error=f"metric is {score}")
    return place_on_leaderboard(score, task.leaderboard_scores(), task.lower_is_better)


def place_on_leaderboard(score: float, board: list[float], lower_is_better: bool) -> Grade:
    """An ok Grade for ``score``: oriented, humanrank and medal against ``board``."""
    medal, above = medal_for(score, board, lower_is_better)
    return Grade(
        status=OK,
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

    check_shape(task, submission.read_bytes())
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


# --- bounds ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Bounds:
    """The most a submission to one task may hold before it is parsed."""

    size: int
    rows: int
    columns: int
    field: int


def bounds(task: Task) -> Bounds:
    st = os.stat(task.answers_path)
    return _bounds(str(task.answers_path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _bounds(answers: str, size: int, mtime_ns: int) -> Bounds:
    rows, columns, field = 0, 0, 0
    with open(answers, newline="", encoding="utf-8", errors="replace") as fh:
        for row in csv.reader(fh):
            rows += 1
            columns = max(columns, len(row))
            field = max(field, max(map(len, row), default=0))
    return Bounds(size=size * SIZE_FACTOR + SIZE_SLACK, rows=rows * ROW_FACTOR + ROW_SLACK,
                  columns=columns * COLUMN_FACTOR + COLUMN_SLACK, field=field * FIELD_FACTOR + FIELD_SLACK)


def check_shape(task: Task, data: bytes) -> None:
    """InvalidSubmission unless ``data`` is UTF-8 CSV within the task's bounds: its size, its
    rows, its columns (distinct names in the header) and the length of every field."""
    limit = bounds(task)
    if len(data) > limit.size:
        raise InvalidSubmission(f"submission.csv holds {len(data):,} bytes, over {limit.size:,} for this task")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidSubmission(f"submission.csv is not UTF-8 text (byte {exc.start:,})") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        for n, row in enumerate(reader, start=1):
            if n > limit.rows:
                raise InvalidSubmission(f"submission.csv has over {limit.rows:,} rows, more than this task's answers allow")
            if len(row) > limit.columns:
                raise InvalidSubmission(f"row {n:,} of submission.csv has {len(row):,} fields, over {limit.columns:,}")
            longest = max(map(len, row), default=0)
            if longest > limit.field:
                raise InvalidSubmission(f"row {n:,} of submission.csv has a field of {longest:,} characters, "
                                        f"over {limit.field:,}")
            if n == 1 and len(set(row)) != len(row):
                raise InvalidSubmission("submission.csv's header repeats a column name")
    except csv.Error as exc:
        raise InvalidSubmission(f"submission.csv is not a readable CSV: {exc}") from None


# --- in a process of its own -----------------------------------------------------------------

def grade_isolated(task: Task, data: bytes | None, timeout_s: float = GRADE_TIMEOUT_S,
                   mem_gi: float | None = None) -> Grade:
    """``grade_submission`` of the bytes ``data`` in a grader process of its own, with a time
    limit and an address-space limit (default: ``GRADE_MEM_GI``, or 64 times the answers if
    larger). The process is kept for the next grade (starting one and importing pandas costs
    seconds on a loaded machine); one over its time is killed, one that died is started again.
    A grade over either limit is an invalid submission; a grader that cannot be started raises
    OSError (the machine's failure)."""
    if data is None:
        return Grade(status=NO_SUBMISSION)
    if mem_gi is None:
        mem_gi = max(GRADE_MEM_GI, 64 * os.stat(task.answers_path).st_size / 2**30)
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        path = Path(tmp) / "submission.csv"
        path.write_bytes(data)
        os.chmod(tmp, 0o700)
        return _GRADER.grade(task, str(path), timeout_s, int(mem_gi * 2**30))


class _Grader:
    """One grader process, reused; grades one submission at a time (a lock)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.mem: tuple | None = None  # (RLIMIT_AS, PYTHONPATH) it was started with
        self.stderr = None

    def grade(self, task: Task, path: str, timeout_s: float, mem: int) -> Grade:
        with self.lock:
            # a new limit, or a new import path (what unpickles a task's grade_fn): a new process
            if self.proc is None or self.proc.poll() is not None or self.mem != (mem, os.environ.get("PYTHONPATH")):
                self._start(mem)
            request = pickle.dumps({"task": task, "path": path})
            try:
                self.proc.stdin.write(len(request).to_bytes(8, "big") + request)
                self.proc.stdin.flush()
            except OSError:
                return self._failed()
            line = self._read_line(timeout_s)
            if line is None:
                self._stop()
                return Grade(status=INVALID_SUBMISSION, grade_error=f"grading took over {timeout_s:g} s: stopped")
            if not line:
                return self._failed()
            answer = json.loads(line)
            if "infra" in answer:
                raise RuntimeError(f"the grader could not read its request: {answer['infra']}")
            return Grade(**answer)

    def _start(self, mem: int) -> None:
        self._stop()
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"from train.env.grading import _grade_child; _grade_child({mem})"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, cwd="/", env=env)
        self.mem = (mem, os.environ.get("PYTHONPATH"))

    def _read_line(self, timeout_s: float) -> str | None:
        """The grader's next line; '' when it closed its output (it died), None when the time
        ran out."""
        fd, buf, deadline = self.proc.stdout.fileno(), b"", time.monotonic() + timeout_s
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return ""
            buf += chunk
        return buf.decode("utf-8", "replace")

    def _failed(self) -> Grade:
        rc = self.proc.wait()
        how = f"exit status {rc}" if rc >= 0 else f"killed by {signal.Signals(-rc).name}"
        self.stderr.seek(0)
        last = self.stderr.read().decode("utf-8", "replace").strip().splitlines()[-1:]
        self._stop()
        return Grade(status=INVALID_SUBMISSION, grade_error=f"grader process failed: {how}{': ' + last[0] if last else ''}")

    def _stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
            self.proc = None
        if self.stderr is not None:
            self.stderr.close()
            self.stderr = None


_GRADER = _Grader()
atexit.register(_GRADER._stop)


def _grade_child(mem: int) -> None:
    """The grader process: its limit first, then per request (a length, a pickle on stdin) the
    grade as one JSON line on its own stdout; what a grader prints goes to stderr."""
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    source = sys.stdin.buffer
    while True:
        size = source.read(8)
        if len(size) < 8:
            return
        try:
            request = pickle.loads(source.read(int.from_bytes(size, "big")))
        except Exception as exc:  # noqa: BLE001 - the trainer's request, not the submission: its failure
            out.write(json.dumps({"infra": f"{type(exc).__name__}: {exc}"}) + "\n")
            out.flush()
            continue
        try:
            grade = grade_submission(request["task"], Path(request["path"]))
        except MemoryError:
            grade = Grade(status=INVALID_SUBMISSION, grade_error="grader failed: MemoryError (the grader's memory limit)")
        out.write(json.dumps(asdict(grade)) + "\n")
        out.flush()
