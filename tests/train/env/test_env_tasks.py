"""Bundled tasks, the MLE-bench prepared layout, reference solutions and the Ray backend."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from train.env import (LocalExecutor, TaskNotFoundError, bundled_task_names, evaluate, load_task)

SLUGS = ["mini-regression-rmse", "mini-tabular-accuracy", "mini-tabular-logloss", "mini-text-classification"]


def test_four_bundled_tasks_with_their_directions():
    assert bundled_task_names() == SLUGS
    got = {s: (load_task(s).metric, load_task(s).lower_is_better) for s in SLUGS}
    assert got == {"mini-regression-rmse": ("rmse", True), "mini-tabular-accuracy": ("accuracy", False),
                   "mini-tabular-logloss": ("logloss", True), "mini-text-classification": ("accuracy", False)}


@pytest.mark.parametrize("slug", SLUGS)
def test_bundled_task_layout(slug):
    task = load_task(slug)
    board = task.leaderboard_scores()
    assert len(board) == 300
    assert board == sorted(board, reverse=not task.lower_is_better)  # best first, as MLE-bench
    names = {p.name for p in task.public_dir.iterdir()}
    assert names == {"train.csv", "test.csv", "sample_submission.csv"}
    assert task.answers_path.is_file() and "submission" in task.description
    assert (task.root / "reference_solution.py").is_file()


def test_bundled_tasks_stay_small():
    root = load_task(SLUGS[0]).root.parent
    assert sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) < 5 * 2**20


def _reference_record(slug, limits):
    task = load_task(slug)
    code = (task.root / "reference_solution.py").read_text()
    return evaluate(task, [f"```python\n{code}```"], LocalExecutor(1), limits)[0]


def test_lower_is_better_reference_solutions_score_ok(limits):
    # (accuracy and text references run in the status and CLI tests); both nodes at once
    slugs = ["mini-regression-rmse", "mini-tabular-logloss"]
    with ThreadPoolExecutor(2) as pool:
        records = list(pool.map(lambda s: _reference_record(s, limits), slugs))
    assert [r["status"] for r in records] == ["ok", "ok"]
    # the generator's own scores for the same models on this install's answers (scores.json)
    expected = [json.loads((load_task(s).root / "scores.json").read_text())["reference"] for s in slugs]
    assert [r["test_metric"] for r in records] == pytest.approx(expected, abs=2e-3)
    assert all(r["oriented"] == -r["test_metric"] for r in records)
    for slug, record in zip(slugs, records):
        board = load_task(slug).leaderboard_scores()
        worse = sum(s > record["test_metric"] for s in board) + 0.5 * sum(s == record["test_metric"] for s in board)
        assert record["reward"] == pytest.approx(worse / len(board))


def test_unknown_task_names_the_known_ones(tmp_path):
    with pytest.raises(TaskNotFoundError, match="mini-tabular-accuracy"):
        load_task("nope")


def test_mlebench_prepared_layout_with_registry_config(tmp_path):
    """A real MLE-bench competition: prepared/{public,private}, config.yaml, leaderboard best first."""
    src = load_task("mini-regression-rmse")
    task_dir = tmp_path / "mini-regression-rmse"
    shutil.copytree(src.public_dir, task_dir / "prepared" / "public")
    shutil.copytree(src.private_dir, task_dir / "prepared" / "private")
    shutil.copy(src.root / "leaderboard.csv", task_dir)
    shutil.copy(src.root / "description.md", task_dir)
    (task_dir / "config.yaml").write_text(
        "id: mini-regression-rmse\ngrader:\n  name: rmse\n  grade_fn: x:y\n"
        "dataset:\n  answers: mini-regression-rmse/prepared/private/answers.csv\n")
    task = load_task("mini-regression-rmse", tmp_path)
    assert (task.metric, task.lower_is_better, task.answers_file) == ("rmse", True, "answers.csv")
    assert task.public_dir == task_dir / "prepared" / "public"


def test_import_stays_light():
    code = ("import sys, train.env, train.env.cli; "
            "print(sorted(m for m in ('torch', 'pandas', 'numpy', 'ray', 'sklearn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# The Ray driver runs in a child process: ray.init installs process-wide C++ terminate and
# failure-signal handlers that ray.shutdown leaves behind, so a pytest worker that hosted the
# driver could later die without a Python traceback (an xdist worker did, 13 minutes after this
# test, in an unrelated DuckLake test).
RAY_DRIVER = """
import json, sys
import ray
from train.env import Limits, RayExecutor, evaluate, load_task

limits, completions = json.loads(sys.stdin.read())
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
try:
    records = evaluate(load_task("mini-tabular-accuracy"), completions, RayExecutor(), Limits(**limits))
finally:
    ray.shutdown()
print(json.dumps([[r["status"], r["exc_type"], r["where"]] for r in records]))
"""


@pytest.mark.slow
def test_ray_backend_runs_the_same_nodes(limits, case):
    pytest.importorskip("ray")
    import dataclasses

    completions = [f"```python\n{case('crashed.py')}```", f"```python\n{case('no_submission.py')}```"]
    given = json.dumps([dataclasses.asdict(limits), completions])
    out = subprocess.run([sys.executable, "-c", RAY_DRIVER], input=given, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    records = json.loads(out.stdout.strip().splitlines()[-1])
    assert [(status, exc_type) for status, exc_type, _ in records] == [("crashed", "ValueError"),
                                                                       ("no_submission", None)]
    assert all(where.startswith("ray:") for _, _, where in records)


def test_a_broken_leaderboard_fails_at_load_with_its_file(tmp_path):
    from train.env.errors import TaskLayoutError

    shutil.copytree(load_task("mini-tabular-accuracy").root, tmp_path / "t")
    (tmp_path / "t" / "leaderboard.csv").write_text("teamName,score\nt1,0.9\nt2,n/a\n")
    with pytest.raises(TaskLayoutError, match=r"leaderboard.csv:3: score .n/a. is not a number"):
        load_task("t", tmp_path)


def test_the_package_ships_no_task_data_and_each_install_draws_its_own(tmp_path):
    """The answers live in this user's 0700 data dir, not beside the package; a second
    generation (another install, or a node importing the generator) draws other answers."""
    from train.env import bundled
    from train.env.tasks import BUNDLED_ROOT

    assert sorted(p.name for p in BUNDLED_ROOT.rglob("*.csv")) == []
    task = load_task("mini-tabular-accuracy")
    assert task.root.is_relative_to(bundled.data_root()) and not task.root.is_relative_to(BUNDLED_ROOT.parent.parent)
    assert oct(bundled.data_root().stat().st_mode & 0o777) == "0o700"
    other = bundled.generate(tmp_path / "other-install")
    mine, theirs = task.answers_path.read_text(), (other / task.name / "private" / "answers.csv").read_text()
    assert mine.splitlines()[0] == theirs.splitlines()[0] == "id,target"
    assert mine != theirs
