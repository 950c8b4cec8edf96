"""An OOM (or CUDA error) in any phase of `train run` is one `Error:` line naming the phase and
the setting to change, and nothing of the failed round lands in the warehouse."""
from __future__ import annotations

import contextlib

import pytest
from click.testing import CliRunner

from tests.train.test_run import TASK, CannedBackend, model_dir  # noqa: F401 - shared fixture
from tests.train.rollout.conftest import tiny_model, tiny_tokenizer  # noqa: F401 - shared fixtures

SETTING = {"gen": "gpu_memory_utilization", "old_log_prob": "response_cap", "ref": "response_cap",
           "update_actor": "response_cap", "update_weights": "gpu_memory_utilization",
           "save_checkpoint": "gpu_memory_utilization"}


def _fail_in_round_two(monkeypatch, target: str, error: Exception) -> None:
    """Raise `error` inside phase `target` of round 2 (in the phase's body, as the work would)."""
    from train.learn.timing import PhaseTimer

    original, gens = PhaseTimer.phase, []

    @contextlib.contextmanager
    def phase(self, name):
        gens.extend([name] if name == "gen" else [])
        with original(self, name):
            if name == target and len(gens) == 2:
                raise error
            yield

    monkeypatch.setattr(PhaseTimer, "phase", phase)


@pytest.mark.parametrize("phase", list(SETTING))
def test_oom_in_a_phase_is_one_error_line_and_the_round_is_not_written(db_url, model_dir, monkeypatch, tmp_path,
                                                                       phase):
    import torch

    from train.cli import main
    from warehouse.db import connect

    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer))
    _fail_in_round_two(monkeypatch, phase, torch.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 139.81 GiB"))
    db = db_url.removeprefix("duckdb:///")
    result = CliRunner().invoke(main, ["run", "--model", str(model_dir), "--rounds", "2", "--tasks", TASK, "--db", db,
                                       "--checkpoint-dir", str(tmp_path / "ck"), "--no-health-gate",
                                       "--set", "siblings_per_expansion=2", "--run-id", "r_oom"])
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output
    assert f"phase {phase}: out of GPU memory" in errors[0] and f"--set {SETTING[phase]}=" in errors[0]
    assert "round 2" in errors[0]
    with connect(db_url, read_only=True) as con:
        rounds = {r[0] for r in con.execute("SELECT DISTINCT round FROM nodes").fetchall()}
        steps = [r[0] for r in con.execute("SELECT step FROM steps").fetchall()]
    assert rounds == {1} and steps == [1]


def test_a_cuda_error_names_its_phase_and_an_unrelated_error_still_raises():
    from train.device_errors import GuardedTimer
    from warehouse.arms import get_arm
    from warehouse.errors import TerminalError

    timer = GuardedTimer(get_arm("hr24k_u6"), 3)
    with pytest.raises(TerminalError, match=r"round 3, phase ref: RuntimeError \(CUDA error: an illegal memory"):
        with timer.phase("ref"):
            raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore lines")
    with pytest.raises(KeyError):
        with timer.phase("gen"):
            raise KeyError("not a device error")
