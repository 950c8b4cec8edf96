"""Synthetic twins of the arms' MLE-bench competitions (and spaceship-titanic) graded by the
built-in graders: the sample submission's score worked out by hand from MLE-bench's metric,
its humanrank and medal on the twin's leaderboard, a perfect submission, an invalid one."""
from __future__ import annotations

import sys

import pytest

from tests.train.env.twins import COMPETITIONS, build_twin, to_csv_text
from train.env.grading import grade_submission
from train.env.tasks import load_task

EXPECTED_METRIC = {
    "aerial-cactus-identification": ("roc_auc", "id", ("has_cactus",)),
    "dogs-vs-cats-redux-kernels-edition": ("logloss", "id", ("label",)),
    "text-normalization-challenge-english-language": ("accuracy", "id", ("after",)),
    "text-normalization-challenge-russian-language": ("accuracy", "id", ("after",)),
    "spooky-author-identification": ("logloss", "id", ("EAP", "HPL", "MWS")),
    "plant-pathology-2020-fgvc7": ("mean_columnwise_roc_auc", "image_id",
                                   ("healthy", "multiple_diseases", "rust", "scab")),
    "denoising-dirty-documents": ("rmse", "id", ("value",)),
    "spaceship-titanic": ("accuracy", "PassengerId", ("Transported",)),
}


@pytest.fixture(params=COMPETITIONS)
def twin(request, tmp_path):
    twin = build_twin(tmp_path / "tasks", request.param)
    twin["task"] = load_task(request.param, tmp_path / "tasks")
    return twin


def _grade(twin, tmp_path, frame):
    path = tmp_path / "submission.csv"
    path.write_text(frame if isinstance(frame, str) else to_csv_text(frame))
    return grade_submission(twin["task"], path)


def test_registry_config_maps_to_the_builtin_metric_and_sample_columns(twin):
    task = twin["task"]
    assert (task.metric, task.id_column, task.target_columns) == EXPECTED_METRIC[task.name]
    assert task.lower_is_better == twin["lower"] and task.grade_fn is None


def test_sample_submission_scores_what_mlebench_would(twin, tmp_path):
    sample = next((twin["dir"] / "prepared").glob("*/*ample*ubmission.csv"))
    grade = _grade(twin, tmp_path, sample.read_text())
    assert grade.status == "ok"
    assert grade.test_metric == pytest.approx(round(twin["sample_score"], 5), abs=1e-9)
    # Four teams better, one equal, five worse: (5 + 0.5) / 10; N=10 puts bronze at position 4.
    assert grade.humanrank == pytest.approx(0.55)
    assert (grade.medal, grade.above_median) == (None, True)


def test_perfect_submission_wins_gold(twin, tmp_path):
    grade = _grade(twin, tmp_path, twin["perfect"])
    assert (grade.status, grade.test_metric) == ("ok", twin["perfect_score"])
    assert (grade.humanrank, grade.medal) == (1.0, "gold")


def test_invalid_submission_says_why(twin, tmp_path):
    grade = _grade(twin, tmp_path, twin["invalid"])
    assert grade.status == "invalid_submission" and twin["invalid_says"] in grade.grade_error
    assert grade.test_metric is None and grade.humanrank is None


def test_a_metric_error_is_an_invalid_submission_not_an_exception(tmp_path):
    """ROC AUC is undefined when the answers hold one class (sklearn warns and returns NaN,
    older versions raise): invalid, with the reason."""
    twin = build_twin(tmp_path / "tasks", "aerial-cactus-identification")
    answers = twin["dir"] / "prepared" / "private" / "test.csv"
    answers.write_text(answers.read_text().replace(",0\n", ",1\n"))
    grade = grade_submission(load_task(twin["dir"].name, tmp_path / "tasks"), answers)
    assert grade.status == "invalid_submission" and grade.grade_error in ("metric is nan",) or "grader failed: ValueError" in grade.grade_error


@pytest.fixture
def fake_mlebench(tmp_path, monkeypatch):
    """An importable ``mlebench`` whose spaceship-titanic grader raises on purpose."""
    pkg = tmp_path / "site" / "mlebench" / "competitions" / "spaceship-titanic"
    pkg.mkdir(parents=True)
    for d in (pkg.parent.parent, pkg.parent):
        (d / "__init__.py").write_text("")
    (pkg / "grade.py").write_text(
        "class InvalidSubmissionError(Exception):\n    pass\n\n"
        "def grade(submission, answers):\n"
        "    if 'Transported' not in submission.columns:\n"
        "        raise InvalidSubmissionError('Submission must have a `Transported` column')\n"
        "    raise RuntimeError('grader bug')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield
    for name in [m for m in sys.modules if m.startswith("mlebench")]:
        del sys.modules[name]


def test_grade_fn_is_used_only_with_mlebench_and_its_failures_are_invalid(tmp_path, fake_mlebench):
    twin = build_twin(tmp_path / "tasks", "spaceship-titanic")
    task = load_task("spaceship-titanic", tmp_path / "tasks")
    assert task.grade_fn is not None and task.id_column == "PassengerId"
    twin["task"] = task
    raised = _grade(twin, tmp_path, twin["perfect"])
    assert raised.status == "invalid_submission" and "grader failed: RuntimeError: grader bug" in raised.grade_error
    refused = _grade(twin, tmp_path, twin["invalid"])
    assert refused.status == "invalid_submission" and "`Transported` column" in refused.grade_error


def test_unknown_grader_without_mlebench_is_a_clear_error(tmp_path):
    from train.env.errors import TaskLayoutError

    twin = build_twin(tmp_path / "tasks", "spaceship-titanic")
    config = twin["dir"] / "config.yaml"
    config.write_text(config.read_text().replace("id: spaceship-titanic", "id: my-comp")
                      .replace("name: accuracy", "name: map-at-5"))
    with pytest.raises(TaskLayoutError, match="'map-at-5' has no built-in equivalent.*mlebench is not installed"):
        load_task("spaceship-titanic", tmp_path / "tasks")


@pytest.mark.slow
def test_train_env_check_grades_a_correct_solution_of_every_twin(tmp_path, case):
    """The whole path, through the CLI: the sandboxed node submits the sample submission
    it finds in ./input, and the record carries the score worked out by hand."""
    import json

    from click.testing import CliRunner

    from train.cli import main

    code = tmp_path / "solution.py"
    code.write_text(case("copy_sample_submission.py"))
    for competition in COMPETITIONS:
        twin = build_twin(tmp_path / "tasks", competition)
        result = CliRunner().invoke(main, ["env", "check", competition, "--code", str(code), "--tasks-root",
                                           str(tmp_path / "tasks"), "--format", "json", "--timeout", "120"])
        assert result.exit_code == 0, result.output
        record = json.loads(result.output)
        assert record["status"] == "ok", (competition, record["grade_error"], record["term_tail"])
        assert record["test_metric"] == pytest.approx(round(twin["sample_score"], 5), abs=1e-9), competition
        assert record["humanrank"] == pytest.approx(0.55) and record["reward"] == pytest.approx(0.55)
