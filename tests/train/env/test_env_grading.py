"""Humanrank, medals and submission validity against hand-computed leaderboards."""
from __future__ import annotations

import dataclasses
import math
import os
import time
from pathlib import Path

import pytest

from train.env import humanrank, medal_for, medal_thresholds
from train.env.grading import GRADE_ERROR_CHARS, grade_isolated, grade_submission
from train.env.metrics import logloss, rmse

HIGHER = [0.9, 0.8, 0.8, 0.7, 0.6]  # best first
LOWER = [0.1, 0.2, 0.2, 0.3, 0.4]


@pytest.mark.parametrize("board, lower, score, expected", [
    (HIGHER, False, 0.8, (2 + 0.5 * 2) / 5),  # beats 0.7 and 0.6, ties two 0.8s
    (HIGHER, False, 0.95, 1.0),
    (HIGHER, False, 0.5, 0.0),
    (HIGHER, False, 0.9, (4 + 0.5) / 5),
    (LOWER, True, 0.2, (2 + 0.5 * 2) / 5),
    (LOWER, True, 0.25, 2 / 5),
    (LOWER, True, 0.05, 1.0),
    (LOWER, True, 9.0, 0.0),
    ([0.5] * 4, False, 0.5, 0.5),  # equal to every team: the middle
])
def test_humanrank_counts_worse_teams_and_half_the_ties(board, lower, score, expected):
    assert humanrank(score, board, lower) == pytest.approx(expected)


def test_humanrank_ties_after_rounding_to_five_decimals():
    assert humanrank(0.800001, HIGHER, False) == pytest.approx(0.6)


@pytest.mark.parametrize("board, lower, score, medal, above", [
    # N=5 (< 100): gold at position 1 (0.9), silver at 1 (0.9), bronze at 2 (0.8); median 0.8
    (HIGHER, False, 0.9, "gold", True),
    (HIGHER, False, 0.8, "bronze", False),  # ties the median: not strictly above
    (HIGHER, False, 0.79, None, False),
    (LOWER, True, 0.1, "gold", True),
    (LOWER, True, 0.2, "bronze", False),
    (LOWER, True, 0.25, None, False),
    (LOWER, True, 0.15, "bronze", True),
])
def test_medals_on_a_small_leaderboard(board, lower, score, medal, above):
    assert medal_for(score, board, lower) == (medal, above)


def test_thresholds_between_250_and_1000_teams():
    board = list(range(299, -1, -1))  # 300 teams, higher is better: position p has 300 - p
    assert medal_thresholds(board, False) == (290, 250, 200, 149.5)  # positions 10, 50, 100
    assert medal_for(290, board, False)[0] == "gold"
    assert medal_for(289.5, board, False)[0] == "silver"
    assert medal_for(200, board, False)[0] == "bronze"
    assert medal_for(199.9, board, False)[0] is None
    assert humanrank(150, board, False) == pytest.approx(150.5 / 300)


def test_thresholds_between_100_and_250_teams_lower_is_better():
    board = list(range(150))  # best (0) first; positions 10, 30, 60
    assert medal_thresholds(board, True)[:3] == (9, 29, 59)
    assert [medal_for(s, board, True)[0] for s in (9, 10, 59, 60)] == ["gold", "silver", "bronze", None]


def test_thresholds_for_1000_teams_and_more():
    board = [float(s) for s in range(2000, 0, -1)]  # positions 14, 100, 200
    assert medal_thresholds(board, False)[:3] == (1987.0, 1901.0, 1801.0)


def test_metrics_on_hand_computed_values():
    assert rmse([1, 2, 3], [1, 2, 5]) == pytest.approx(math.sqrt(4 / 3))
    assert logloss([[1, 0], [0, 1]], [[0.8, 0.2], [0.4, 0.6]]) == pytest.approx(
        -(math.log(0.8) + math.log(0.6)) / 2)


def _grade(task, tmp_path, text):
    path = tmp_path / "submission.csv"
    path.write_text(text)
    return grade_submission(task, path)


def test_valid_submission_is_placed_on_the_leaderboard(tiny_task, tmp_path):
    grade = _grade(tiny_task, tmp_path, "id,target\n4,b\n3,a\n2,a\n1,a\n")  # 3 of 4, any order
    assert (grade.status, grade.test_metric, grade.oriented) == ("ok", 0.75, 0.75)
    assert grade.humanrank == pytest.approx((2 + 0.5) / 4)
    # N=4: every medal sits at position max(1, int(0.4 * 4)) = 1 or above, i.e. needs 1.0;
    # the median is (0.75 + 0.5) / 2 = 0.625, which 0.75 beats.
    assert (grade.medal, grade.above_median) == (None, True)


@pytest.mark.parametrize("text, fragment", [
    ("id,label\n1,a\n2,b\n3,a\n4,b\n", "columns"),
    ("id,target\n1,a\n2,b\n3,a\n", "rows"),
    ("id,target\n1,a\n2,b\n3,a\n9,b\n", "values do not match"),
    ("id,target\n1,a\n1,b\n3,a\n4,b\n", "duplicate"),
    ("id,target\n1,a\n2,\n3,a\n4,b\n", "missing"),
])
def test_invalid_submissions_say_why(tiny_task, tmp_path, text, fragment):
    grade = _grade(tiny_task, tmp_path, text)
    assert grade.status == "invalid_submission" and fragment in grade.grade_error
    assert grade.test_metric is None and grade.oriented is None


def test_missing_submission(tiny_task, tmp_path):
    assert grade_submission(tiny_task, tmp_path / "absent.csv").status == "no_submission"


def test_multiclass_logloss_renormalises_rows_outside_spooky(tmp_path):
    """Rows are renormalised (scikit-learn < 1.7), so doubling every probability changes nothing."""
    from train.env import load_task

    root = tmp_path / "tasks" / "tiny-logloss"
    (root / "public").mkdir(parents=True)
    (root / "private").mkdir()
    (root / "public" / "sample_submission.csv").write_text("id,a,b\n1,0.5,0.5\n2,0.5,0.5\n")
    (root / "private" / "answers.csv").write_text("id,a,b\n1,1,0\n2,0,1\n")
    (root / "leaderboard.csv").write_text("teamName,score\nt1,0.1\nt2,0.9\n")
    (root / "grader.toml").write_text('metric = "logloss"\ndirection = "lower"\n')
    task = load_task("tiny-logloss", tmp_path / "tasks")
    halves = _grade(task, tmp_path, "id,a,b\n1,0.8,0.2\n2,0.4,0.6\n")
    doubled = _grade(task, tmp_path, "id,a,b\n1,1.6,0.4\n2,0.8,1.2\n")
    assert halves.test_metric == round(-(math.log(0.8) + math.log(0.6)) / 2, 5)
    assert doubled.status == "invalid_submission" and "between 0 and 1" in doubled.grade_error
    rescaled = _grade(task, tmp_path, "id,a,b\n1,0.4,0.1\n2,0.2,0.3\n")  # rows sum to 0.5
    assert rescaled.test_metric == halves.test_metric


# --- bounded grading: a submission is the policy's output ------------------------------------

@pytest.mark.parametrize("attack, fragment", [
    # 100,000 identical column names in 400 KB: pandas took over a minute to read them
    ("identical_columns", "fields, over"),
    ("many_distinct_columns", "bytes, over"),
    ("long_field", "characters, over"),
    ("many_rows", "rows, more than"),
    ("repeated_header", "repeats a column name"),
    ("not_utf8", "not UTF-8"),
])
def test_a_submission_is_bounded_before_it_is_parsed(tiny_task, tmp_path, attack, fragment):
    text = {
        "identical_columns": ("id," + ",".join(["target"] * 100_000) + "\n1,a\n").encode(),
        "many_distinct_columns": ("id," + ",".join(f"c{i}" for i in range(300_000)) + "\n").encode(),
        "long_field": b"id,target\n1," + b"a" * 100_000 + b"\n2,b\n3,a\n4,b\n",
        "many_rows": b"id,target\n" + b"1,a\n" * 1000,
        "repeated_header": b"id,target,target\n1,a,a\n2,b,b\n3,a,a\n4,b,b\n",
        "not_utf8": b"id,target\n1,\xff\n2,b\n3,a\n4,b\n",
    }[attack]
    path = tmp_path / "submission.csv"
    path.write_bytes(text)
    grade = grade_submission(tiny_task, path)
    assert grade.status == "invalid_submission" and fragment in grade.grade_error, grade.grade_error
    assert len(grade.grade_error) <= GRADE_ERROR_CHARS


def _raises_a_long_error(sub, answers):
    raise ValueError("x" * 1_000_000)


def _sleeps(sub, answers):
    time.sleep(3600)


def _allocates(sub, answers):
    return len(bytearray(6 * 2**30))


def _dies(sub, answers):
    os._exit(3)


@pytest.fixture
def child_imports_this_file(monkeypatch):
    """The grader's child process unpickles these graders by this module's name."""
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))


def test_grade_error_is_capped(tiny_task, tmp_path):
    grade = _grade(dataclasses.replace(tiny_task, grade_fn=_raises_a_long_error), tmp_path, "id,target\n1,a\n")
    assert grade.status == "invalid_submission" and grade.grade_error.startswith("grader failed: ValueError: xxx")
    assert len(grade.grade_error) <= GRADE_ERROR_CHARS and "1,000,0" in grade.grade_error


def test_grading_in_its_own_process_grades_as_in_this_one(tiny_task, tmp_path):
    data = b"id,target\n4,b\n3,a\n2,a\n1,a\n"
    assert grade_isolated(tiny_task, data) == _grade(tiny_task, tmp_path, data.decode())
    assert grade_isolated(tiny_task, None).status == "no_submission"
    assert grade_isolated(tiny_task, b"id,target\n" + b"1,a\n" * 1000).grade_error.endswith("more than this task's answers allow")


@pytest.mark.parametrize("grader, fragment", [
    (_sleeps, "grading took over 20 s: stopped"),
    (_allocates, "MemoryError"),
    (_dies, "grader process failed: exit status 3"),
])
def test_a_grader_over_its_limits_is_stopped_and_the_submission_is_invalid(tiny_task, child_imports_this_file,
                                                                           grader, fragment):
    task = dataclasses.replace(tiny_task, grade_fn=grader)
    grade = grade_isolated(task, b"id,target\n1,a\n2,b\n3,a\n4,b\n", timeout_s=20, mem_gi=2)
    assert grade.status == "invalid_submission" and fragment in grade.grade_error, grade.grade_error


def test_the_grader_process_is_reused_and_replaced_after_a_kill(tiny_task, child_imports_this_file):
    from train.env import grading

    data = b"id,target\n4,b\n3,a\n2,a\n1,a\n"
    first = grade_isolated(tiny_task, data, mem_gi=3)
    pid = grading._GRADER.proc.pid
    assert grade_isolated(tiny_task, data, mem_gi=3) == first and grading._GRADER.proc.pid == pid  # one process
    stopped = grade_isolated(dataclasses.replace(tiny_task, grade_fn=_sleeps), data, timeout_s=10, mem_gi=3)
    assert stopped.grade_error == "grading took over 10 s: stopped" and grading._GRADER.proc is None
    assert grade_isolated(tiny_task, data, mem_gi=3) == first  # a new one


def test_a_request_the_grader_cannot_read_is_the_machines_failure(tiny_task, monkeypatch):
    """A grade_fn the grader process cannot import (not the submission's doing): an error,
    which makes the node's record infrastructure."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    task = dataclasses.replace(tiny_task, grade_fn=_dies)
    with pytest.raises(RuntimeError, match="could not read its request: ModuleNotFoundError"):
        grade_isolated(task, b"id,target\n1,a\n", mem_gi=3.5)
