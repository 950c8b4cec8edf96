import json

import pytest
import torch

from learn_helpers import optimizer_for, random_samples, tiny_policy, one_thread  # noqa: F401 (autouse)
from train.learn.checkpoint import (ResumePoint, load_checkpoint, parse_resume, save_checkpoint,
                                    step_dir)
from train.learn.step import StepConfig, grpo_step
from train.learn.timing import PhaseTimer
from warehouse.errors import TerminalError

CFG = StepConfig(token_budget=48)


def _adapter(policy) -> dict:
    return {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}


def _step(policy, optimizer, round_no: int) -> dict:
    # the round's samples depend on torch's RNG, as sampling would: RNG state must resume too
    seed = int(torch.randint(0, 10_000, (1,)))
    return grpo_step(policy, optimizer, random_samples(6, seed=seed + round_no), CFG, PhaseTimer())


def test_resume_reproduces_the_next_step(tmp_path):
    torch.manual_seed(7)
    original = tiny_policy()
    opt = optimizer_for(original)
    _step(original, opt, 1)
    save_checkpoint(tmp_path, "run_a", 1, original, opt, meta={"round": 1})
    _step(original, opt, 2)
    expected = _adapter(original)

    torch.manual_seed(12345)  # the new process's RNG differs until the checkpoint restores it
    resumed = tiny_policy()
    opt2 = optimizer_for(resumed)
    state = load_checkpoint(tmp_path, ResumePoint("run_a", 1), resumed, opt2)
    assert state == {"run_id": "run_a", "step": 1, "round": 1}
    _step(resumed, opt2, 2)
    got = _adapter(resumed)
    assert got.keys() == expected.keys()
    for name in expected:
        assert torch.equal(got[name], expected[name]), name


def test_checkpoint_layout(tmp_path):
    policy = tiny_policy()
    out = save_checkpoint(tmp_path, "r", 5, policy, optimizer_for(policy))
    assert out == step_dir(tmp_path, "r", 5) == tmp_path / "r" / "global_step_5"
    assert (out / "adapter" / "adapter_model.safetensors").is_file()
    assert {p.name for p in out.iterdir()} == {"adapter", "optimizer.pt", "rng.pt", "state.json"}
    assert json.loads((out / "state.json").read_text())["step"] == 5


def test_resume_spec_and_missing_checkpoint(tmp_path):
    assert parse_resume("20260720_041422_27b_m4hr24ku6:10") == ResumePoint("20260720_041422_27b_m4hr24ku6", 10)
    with pytest.raises(TerminalError, match="expected RUN or RUN:STEP"):
        parse_resume("run_without_step")
    policy = tiny_policy()
    with pytest.raises(TerminalError, match="no checkpoint at .*global_step_3"):
        load_checkpoint(tmp_path, ResumePoint("nope", 3), policy, optimizer_for(policy))


def test_an_adapter_from_another_model_is_refused_with_its_path(tmp_path):
    from learn_helpers import tiny_base
    from train.learn.lora import prepare_for_training
    from train.policy.lora import add_lora

    deeper = prepare_for_training(add_lora(tiny_base(layers=3), rank=32, alpha=32), gradient_checkpointing=False)
    save_checkpoint(tmp_path, "deep", 1, deeper, optimizer_for(deeper))
    shallow = tiny_policy(checkpointing=False)
    with pytest.raises(TerminalError, match=r"deep/global_step_1/adapter: adapter does not match the policy "
                                            r"\(unexpected .*layers\.2"):
        load_checkpoint(tmp_path, ResumePoint("deep", 1), shallow, optimizer_for(shallow))
