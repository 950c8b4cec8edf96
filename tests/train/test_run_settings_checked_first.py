"""`train run` checks every setting where it is resolved (train.settings.settings_of), before it
touches the warehouse, the sandbox, the model or the tokenizer: a bad one stops it in one line
naming the setting and its source."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from train.settings import RunOptions, settings_of
from warehouse.errors import TerminalError


@pytest.fixture
def nothing_loads(monkeypatch):
    """Any step past the settings fails the test: the loop, the policy loader, the model's
    resolution, the warehouse check and the sandbox check."""
    import train.env.sandbox
    import train.policy.loader
    import train.run
    import train.settings
    import train.tiny.policy

    def loaded(*args, **kwargs):
        raise AssertionError("train run went past its settings with a bad one")

    monkeypatch.setattr(train.run, "run", loaded)
    monkeypatch.setattr(train.policy.loader, "load_policy", loaded)
    monkeypatch.setattr(train.tiny.policy, "resolve_model_path", loaded)
    monkeypatch.setattr(train.settings, "check_warehouse", loaded)
    monkeypatch.setattr(train.env.sandbox, "require_sandbox", loaded)


def train_run(tmp_path, *args):
    from train.cli import main

    return CliRunner().invoke(main, ["run", "--db", str(tmp_path / "w.duckdb"), "--model", "tiny", *args])


def assert_one_line(result, *expected):
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:"), result.output
    for part in expected:
        assert part in lines[0], (part, lines[0])


@pytest.mark.parametrize("pair, expected", [
    ("bogus=1", "--set: unknown or fixed setting(s) bogus"),
    ("name=other", "--set: unknown or fixed setting(s) name"),
    ("response_cap", "--set 'response_cap': expected key=value"),
])
def test_an_unknown_or_malformed_set_stops_before_loading(tmp_path, nothing_loads, pair, expected):
    assert_one_line(train_run(tmp_path, "--set", pair), expected)


@pytest.mark.parametrize("pair", ["update_epochs=lots", "response_cap=big", "bench_random_weights=maybe",
                                  "lr_min_ratio=half"])
def test_a_set_value_of_the_wrong_type_stops_before_loading(tmp_path, nothing_loads, pair):
    assert_one_line(train_run(tmp_path, "--set", pair), f"--set {pair}: not a valid")


@pytest.mark.parametrize("pair, expected", [
    ("update_epochs=0", "needs at least 1"),
    ("keep_layers=-2", "use -1"),
    ("lr_warmup_steps=-1", ">= 0"),
    ("lr_min_ratio=2", "in [0, 1]"),
    ("kl_coef=-0.1", ">= 0"),
    ("kl_target=-1", ">= 0"),
    ("kl_horizon=0", "> 0"),
    ("mismatch_max=0.5", "at least 1"),
    ("mismatch_share_gt1_max=2", "in [0, 1]"),
])
def test_a_set_value_out_of_range_stops_before_loading(tmp_path, nothing_loads, pair, expected):
    assert_one_line(train_run(tmp_path, "--set", pair), f"--set {pair}", expected)


@pytest.mark.parametrize("pair, allowed", [
    ("overlap_exec=sometimes", "auto, on or off"),
    ("vllm_weight_sync=copy", "auto, merged or lora"),
    ("vllm_sleep=maybe", "auto, on or off"),
    ("compile_norms=yes", "auto, on or off"),
    ("policy_offload=disk", "off or host"),
    ("bench_lengths=long", "off, arm or cap"),
    ("lr_schedule=step", "constant or cosine"),
])
def test_a_set_value_outside_its_choices_stops_before_loading(tmp_path, nothing_loads, pair, allowed):
    assert_one_line(train_run(tmp_path, "--set", pair), f"--set {pair}: use {allowed}")


def test_a_cosine_schedule_shorter_than_its_warmup_stops_before_loading(tmp_path, nothing_loads):
    result = train_run(tmp_path, "--rounds", "2", "--set", "lr_schedule=cosine", "--set", "lr_warmup_steps=3")
    assert_one_line(result, "--set lr_schedule=cosine", "total steps (2) must exceed lr_warmup_steps (3)")


def test_policy_offload_with_a_backend_without_weights_of_its_own_stops_before_loading(tmp_path, nothing_loads):
    result = train_run(tmp_path, "--backend", "hf", "--set", "policy_offload=host")
    assert_one_line(result, "--set policy_offload=host", "the hf backend generates with the policy's own weights")


def test_vllm_over_several_processes_stops_before_any_rank_starts(tmp_path, nothing_loads, monkeypatch):
    import train.launch

    def started(*args, **kwargs):
        raise AssertionError("the ranks were started")

    monkeypatch.setattr(train.launch, "launch", started)
    result = train_run(tmp_path, "--backend", "vllm", "--nproc", "2")
    assert_one_line(result, "--backend vllm with --nproc 2: vLLM cannot start inside a multi-rank torchrun run")


def test_without_learning_the_offload_and_backend_do_not_conflict():
    settings = settings_of(RunOptions(backend="hf", learn=False, sets={"policy_offload": "host"}))
    assert settings.knobs.policy_offload == "host"


def test_the_auto_backend_is_checked_once_chosen_before_the_model_loads(db_url, monkeypatch):
    """--backend auto is known only in the loop: its first step resolves the settings again with
    the chosen backend, before the run row, the model or the tokenizer."""
    import train.factories
    import train.run

    def loaded(*args, **kwargs):
        raise AssertionError("the model was loaded with a bad setting")

    monkeypatch.setattr(train.factories, "load_run_policy", loaded)
    monkeypatch.setattr("train.factories.load_run_policy", loaded)
    monkeypatch.setattr("train.factories.make_writer", loaded)
    opts = RunOptions(model="tiny", device="cpu", backend="auto", db_url=db_url, sets={"policy_offload": "host"})
    with pytest.raises(TerminalError, match=r"--set policy_offload=host: the hf backend"):
        train.run.run(opts, log=lambda line: None)


def test_each_setting_records_its_source():
    settings = settings_of(RunOptions(model="tiny", learn=True, seed=3, sets={"temperature": "0.7"}))
    assert settings.source("temperature") == "--set" and settings.knobs.temperature == 0.7
    assert settings.source("response_cap") == "run"  # the tiny policy's cap, chosen by the run
    assert settings.source("siblings_per_expansion") == "arm"
    assert settings.source("seed") == "flag" and settings.source("top_p") == "default"
    set_cap = settings_of(RunOptions(model="tiny", sets={"response_cap": "100"}))
    assert set_cap.source("response_cap") == "--set" and set_cap.arm.response_cap == 100

