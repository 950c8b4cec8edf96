"""An OOM (or CUDA error) in a phase of `train rm` is one `Error:` line naming the phase and the
setting to change, never a traceback; the run reads as failed, what it published before stays,
and the artifact the phase was writing is not left half-written (as `train run`'s
tests/train/test_run_device_errors.py)."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

SETS = ["--set", "grad_accum=2", "--set", "max_steps=4", "--set", "save_at=2", "--set", "lr=3e-3",
        "--set", "lora_rank=8", "--set", "lora_alpha=16", "--set", "max_length=64", "--device", "cpu"]
OOM = "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 139.81 GiB"
ILLEGAL = "CUDA error: an illegal memory access was encountered\nCompile with `TORCH_USE_CUDA_DSA`"


def _raise_at(monkeypatch, owner, name: str, call: int, error: Exception, write_into_dir: bool = False) -> None:
    """`owner.name` raises `error` at its `call`-th call (1-based), after writing a file into its
    output directory when `write_into_dir` (as an export cut short would)."""
    original, calls = getattr(owner, name), []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            if write_into_dir:
                args[-1].mkdir(parents=True, exist_ok=True)
                (args[-1] / "model-00001-of-00002.safetensors").write_bytes(b"half")
            raise error
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, failing)


def _state(db_url: str, run_id: str) -> tuple:
    from warehouse.db import connect

    with connect(db_url, read_only=True) as con:
        state = con.execute('SELECT "state", "exit_reason" FROM "run_state" WHERE "run_id" = ?', [run_id]).fetchone()
        progress = [r[0] for r in con.execute('SELECT "progress" FROM "rm_artifacts" WHERE "run_id" = ? ORDER BY 1',
                                              [run_id]).fetchall()]
    return state, progress


def _one_error_line(result) -> str:
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


@pytest.mark.parametrize("phase, where, setting, published", [
    ("update", "progress 3", "--set pack_tokens=... (now 8192", [2]),
    ("load_model", "member 1", "a smaller --model", []),
    ("evaluate", "progress 2", "--set max_length=... (now 64", []),
])
def test_oom_in_a_phase_of_train_rm_is_one_error_line(db_url, tiny_base, small_eval, tmp_path, monkeypatch, phase,
                                                      where, setting, published):
    import torch

    import train.rm.model
    import train.rm.run
    from train.cli import main

    target = {"update": (train.rm.run, "update_step", 3), "load_model": (train.rm.run, "member_model", 1),
              "evaluate": (train.rm.model, "pair_rewards", 1)}[phase]  # evaluate: the packed update never calls it
    _raise_at(monkeypatch, *target, torch.OutOfMemoryError(OOM))
    result = CliRunner().invoke(main, ["rm", "--model", str(tiny_base), "--eval", str(small_eval), "--proxy-rows", "8",
                                       "--db", db_url, "--run-id", f"oom_{phase}", "--out-dir", str(tmp_path / "out"),
                                       *SETS])
    line = _one_error_line(result)
    assert line.startswith(f"Error: {where}, phase {phase}: out of GPU memory (CUDA out of memory. Tried")
    assert setting in line and "rerun with the changed setting" in line
    (state, reason), progress = _state(db_url, f"oom_{phase}")
    assert state == "failed" and reason.startswith(f"TerminalError: {where}, phase {phase}")
    assert progress == published  # the artifact at progress 2 is published before progress 3's update


def test_a_cuda_error_in_the_soup_export_leaves_no_half_written_artifact(db_url, tiny_base, small_eval, tmp_path,
                                                                         monkeypatch):
    from train.cli import main
    from train.rm.soup import RunningMean

    _raise_at(monkeypatch, RunningMean, "export", 2, RuntimeError(ILLEGAL), write_into_dir=True)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["rm", "--model", str(tiny_base), "--eval", str(small_eval), "--proxy-rows", "8",
                                       "--db", db_url, "--run-id", "soup", "--out-dir", str(out), "--members", "2",
                                       "--steps-per-member", "2", *SETS])
    line = _one_error_line(result)
    assert line.startswith("Error: progress 4, phase soup_accumulate_export: RuntimeError (CUDA error: an illegal")
    assert "--set soup_device=cpu (now auto" in line
    assert (out / "artifact_00002").is_dir() and not (out / "artifact_00004").exists()
    (state, reason), progress = _state(db_url, "soup")
    assert state == "failed" and reason.startswith("TerminalError: progress 4") and progress == [2]


def test_only_a_device_error_becomes_the_line(tmp_path):
    from train.rm.run import RMOptions, phase
    from warehouse.errors import TerminalError

    with pytest.raises(KeyError):
        with phase(RMOptions(), "update", "progress 1"):
            raise KeyError("not a device error")
    unfinished = tmp_path / "artifact_00001"
    unfinished.mkdir()
    with pytest.raises(TerminalError, match=r"^progress 1, phase save_checkpoint: RuntimeError \(CUDA error: an"):
        with phase(RMOptions(), "save_checkpoint", "progress 1", unfinished=unfinished):
            raise RuntimeError(ILLEGAL)
    assert not unfinished.exists()
