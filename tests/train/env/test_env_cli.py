"""`train env` through click's CliRunner."""
from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from train.env.cli import env_group


def test_check_prints_the_node_record_as_json(tmp_path):
    from train.env import load_task

    task = load_task("mini-text-classification")
    code = task.root / "reference_solution.py"
    result = CliRunner().invoke(env_group, ["check", "mini-text-classification", "--code", str(code),
                                            "--timeout", "30", "--format", "json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    reference = json.loads((task.root / "scores.json").read_text())["reference"]  # the generator's score
    assert (record["status"], record["test_metric"], record["source"]) == ("ok", reference, "grade")
    assert 0 <= record["reward"] <= 1


def test_check_reads_a_fenced_completion_too(tmp_path):
    completion = tmp_path / "completion.md"
    completion.write_text("Plan.\n```python\nraise KeyError('x')\n```\n")
    result = CliRunner().invoke(env_group, ["check", "mini-tabular-accuracy", "--code", str(completion),
                                            "--format", "json"])
    record = json.loads(result.output)
    assert (record["status"], record["exc_type"], record["reward"]) == ("crashed", "KeyError", -0.5)


def test_unknown_task_is_one_error_line(tmp_path):
    from train.cli import main

    code = tmp_path / "s.py"
    code.write_text("print(1)\n")
    result = CliRunner().invoke(main, ["env", "check", "no-such-task", "--code", str(code)])
    assert result.exit_code == 1
    assert "Error: No task 'no-such-task'" in result.output and "--tasks-root" in result.output


def test_every_command_has_help():
    for name, command in env_group.commands.items():
        assert command.help, name
        result = CliRunner().invoke(env_group, [name, "--help"])
        assert result.exit_code == 0 and "Usage" in result.output
    assert isinstance(env_group, click.Group) and env_group.name == "env"


def test_tasks_lists_every_task_and_the_reason_for_a_broken_one(tmp_path):
    from tests.train.env.twins import build_twin

    build_twin(tmp_path, "spaceship-titanic")
    build_twin(tmp_path, "plant-pathology-2020-fgvc7")
    (tmp_path / "a-broken-task").mkdir()  # sorts first: the listing must go on after it
    result = CliRunner().invoke(env_group, ["tasks", "--tasks-root", str(tmp_path)])
    lines = result.output.splitlines()
    assert result.exit_code == 1
    assert lines[0].split("\t") == ["task", "metric", "direction", "id_column", "targets", "teams"]
    assert lines[1].startswith("a-broken-task\tunreadable: TaskLayoutError") and "public" in lines[1]
    assert lines[2].split("\t") == ["plant-pathology-2020-fgvc7", "mean_columnwise_roc_auc", "higher", "image_id",
                                    "healthy,multiple_diseases,rust,scab", "10"]
    assert lines[3].split("\t") == ["spaceship-titanic", "accuracy", "higher", "PassengerId", "Transported", "10"]


def test_tasks_of_the_bundled_root_as_json():
    result = CliRunner().invoke(env_group, ["tasks", "--format", "json"])
    rows = json.loads(result.output)
    assert result.exit_code == 0 and [r["task"] for r in rows] == [
        "mini-regression-rmse", "mini-tabular-accuracy", "mini-tabular-logloss", "mini-text-classification"]
    assert {(r["metric"], r["direction"], r["id_column"], r["teams"]) for r in rows} == {
        ("rmse", "lower", "id", 300), ("accuracy", "higher", "id", 300), ("logloss", "lower", "id", 300)}


def _without_bubblewrap(monkeypatch):
    from train.env import sandbox

    missing = sandbox.Capabilities(namespaces=True, uid_switch=True, bwrap=False,
                                   bwrap_missing="bubblewrap (bwrap) is not installed")
    monkeypatch.setattr(sandbox, "capabilities", lambda: missing)


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def test_check_refuses_without_bubblewrap_in_one_line_naming_the_install(tmp_path, monkeypatch):
    from train.cli import main

    _without_bubblewrap(monkeypatch)
    code = tmp_path / "s.py"
    code.write_text("open('ran', 'w')\n")
    result = CliRunner().invoke(main, ["env", "check", "mini-tabular-accuracy", "--code", str(code)])
    assert result.exit_code == 1
    [line] = _error_lines(result.output)
    assert line.startswith("Error: bubblewrap (bwrap) is not installed")
    assert "apt-get install bubblewrap" in line and "--unsafe-no-sandbox" in line


def test_run_refuses_without_bubblewrap_before_loading_anything(tmp_path, monkeypatch):
    from train.cli import main

    _without_bubblewrap(monkeypatch)
    db = tmp_path / "wh.duckdb"
    result = CliRunner().invoke(main, ["run", "--rounds", "1", "--db", str(db), "--quiet"])
    assert result.exit_code == 1
    [line] = _error_lines(result.output)
    assert line.startswith("Error: bubblewrap (bwrap) is not installed") and "apt-get install bubblewrap" in line
    assert not db.exists()  # refused before the warehouse or the model was touched


def test_a_worker_without_bubblewrap_refuses_the_node_it_was_sent(monkeypatch):
    # the driver checked its own machine; a Ray worker runs the node on another, which must
    # refuse as the driver would instead of falling back to the deny-list sandbox unasked
    from train.env import evaluate, executors, load_task, sandbox
    from train.env.sandbox import Limits, SandboxUnavailableError

    class Worker:
        """A machine without bubblewrap, unlike the driver's."""

        def run(self, jobs):
            with monkeypatch.context() as there:
                _without_bubblewrap(there)
                return [executors.run_on_worker(job, "ray:10.0.0.7:4242") for job in jobs]

    monkeypatch.setattr(sandbox, "capabilities", lambda: sandbox.Capabilities(True, True, bwrap=True))  # the driver's
    started = []
    monkeypatch.setattr(executors, "run_job", lambda job: started.append(job) or sandbox.run_job(job))
    completion = "```python\nraise KeyError('ran')\n```"
    task = load_task("mini-tabular-accuracy")
    with pytest.raises(SandboxUnavailableError) as refused:
        evaluate(task, [completion], Worker(), Limits(timeout_s=30))
    assert str(refused.value).startswith("worker ray:10.0.0.7:4242: bubblewrap (bwrap) is not installed")
    assert "apt-get install bubblewrap" in str(refused.value) and "--unsafe-no-sandbox" in str(refused.value)
    assert started == []  # refused before the node was staged
    [record] = evaluate(task, [completion], Worker(), Limits(timeout_s=30, allow_list=False))  # the risk named
    assert (record["status"], record["exc_type"], record["where"]) == ("crashed", "KeyError", "ray:10.0.0.7:4242")


def test_check_runs_without_bubblewrap_when_told_the_risk_by_name(tmp_path, monkeypatch):
    from train.cli import main

    _without_bubblewrap(monkeypatch)
    code = tmp_path / "s.py"
    code.write_text("raise KeyError('ran')\n")
    result = CliRunner().invoke(main, ["env", "check", "mini-tabular-accuracy", "--code", str(code),
                                       "--unsafe-no-sandbox", "--format", "json"])
    record = json.loads(result.output)
    assert (record["status"], record["exc_type"]) == ("crashed", "KeyError")  # it ran, outside bwrap


def test_a_bubblewrap_that_cannot_build_a_sandbox_is_named_with_its_fix(tmp_path, monkeypatch):
    from train.cli import main
    from train.env import sandbox

    broken = sandbox.Capabilities(namespaces=True, uid_switch=False, bwrap=False,
                                  bwrap_missing="bubblewrap cannot build a sandbox here (bwrap: No permissions "
                                                "to create new namespace)")
    monkeypatch.setattr(sandbox, "capabilities", lambda: broken)
    code = tmp_path / "s.py"
    code.write_text("print(1)\n")
    result = CliRunner().invoke(main, ["env", "check", "mini-tabular-accuracy", "--code", str(code)])
    [line] = _error_lines(result.output)
    assert result.exit_code == 1 and line.startswith("Error: bubblewrap cannot build a sandbox here")
    assert "user namespaces" in line and "apt-get" not in line and "--unsafe-no-sandbox" in line


@pytest.mark.parametrize("header", ["[/x]", "[bold red]id[/bold red]", "\x1b[2Jid"])
def test_check_prints_markup_and_escapes_a_node_left_as_text(tmp_path, header):
    """A header the grader quotes in grade_error, and output full of escape sequences: the
    pretty record shows them as written or escaped, and the check does not die."""
    code = tmp_path / "solution.py"
    code.write_text("import sys\n"
                    f"open('submission/submission.csv', 'w').write({header!r} + ',target\\n1,a\\n')\n"
                    "sys.stdout.write('\\x1b]0;owned\\x07\\x1b[31m[bold]red[/bold]\\r\\n')\n")
    result = CliRunner().invoke(env_group, ["check", "mini-tabular-accuracy", "--code", str(code)])
    assert result.exit_code == 0, result.output
    assert not any(c in result.output for c in "\x1b\x07\r"), repr(result.output)
    assert "invalid_submission" in result.output and "[bold]red[/bold]" in result.output
    assert "\\x1b]0;owned\\x07" in result.output
