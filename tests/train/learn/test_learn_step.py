import pytest
import torch

from learn_helpers import optimizer_for, random_samples, tiny_policy, one_thread  # noqa: F401 (autouse)
from train.learn.loss import LossConfig
from train.learn.step import StepConfig, grpo_step
from train.learn.timing import PhaseTimer


def test_first_step_has_ratio_one_and_zero_kl():
    policy = tiny_policy()  # fresh adapter: B = 0, so policy == reference
    metrics = grpo_step(policy, optimizer_for(policy), random_samples(6),
                        StepConfig(token_budget=40), PhaseTimer())
    assert metrics["kl"] == 0.0
    assert metrics["ratio_max"] == 1.0 and metrics["clip_frac"] == 0.0
    assert metrics["micro_batches"] > 1


def test_ratio_is_one_at_the_first_step_even_when_policy_differs_from_reference():
    policy = tiny_policy(init=False)
    metrics = grpo_step(policy, optimizer_for(policy), random_samples(6),
                        StepConfig(token_budget=40), PhaseTimer())
    assert metrics["ratio_max"] == 1.0
    assert metrics["kl"] > 0.0


def _sgd_delta(budget: int) -> list[torch.Tensor]:
    policy = tiny_policy(init=False)
    params = [p for p in policy.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in params]
    sgd = torch.optim.SGD(params, lr=1.0)
    cfg = StepConfig(token_budget=budget, max_grad_norm=1e9, logprob_chunk=7,
                     loss=LossConfig(kl_coef=0.1))
    grpo_step(policy, sgd, random_samples(8, seed=3), cfg, PhaseTimer())
    return [b - p.detach() for b, p in zip(before, params)]  # = the gradient


def test_one_micro_batch_or_many_give_the_same_gradient():
    one, many = _sgd_delta(budget=10_000), _sgd_delta(budget=33)
    assert any(float(g.abs().max()) > 1e-4 for g in one)
    for a, b in zip(one, many):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_only_the_lora_weights_change():
    policy = tiny_policy()
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    metrics = grpo_step(policy, optimizer_for(policy), random_samples(6), StepConfig(), PhaseTimer())
    changed = {n for n, p in policy.named_parameters() if not torch.equal(before[n], p)}
    assert changed and all("lora_" in n for n in changed)
    # every adapter B matrix moved (A gets no gradient while B is zero)
    lora_b = {n for n in before if "lora_B" in n}
    assert lora_b <= changed
    assert metrics["grad_norm"] > 0 and metrics["tokens"] == sum(
        len(s.response_ids) for s in random_samples(6))


def test_phases_are_timed_under_the_seed_names():
    policy = tiny_policy()
    timer = PhaseTimer()
    grpo_step(policy, optimizer_for(policy), random_samples(4), StepConfig(), timer)
    row = timer.row(step=3)
    assert set(row["phases_s"]) == {"old_log_prob", "ref", "adv", "update_actor"}
    assert row["step"] == 3 and row["total_s"] >= sum(row["phases_s"].values())
    with pytest.raises(ValueError, match="unknown phase"):
        with timer.phase("rollout"):
            pass


def test_fused_lora_gives_the_same_step_as_peft():
    from train.learn.lora import fuse_lora

    deltas = []
    for fused in (False, True):
        policy = tiny_policy(init=False, fuse=False)
        if fused:
            assert fuse_lora(policy) == 2 * 7  # q k v o gate up down, 2 layers
        params = [p for p in policy.parameters() if p.requires_grad]
        before = [p.detach().clone() for p in params]
        cfg = StepConfig(token_budget=40, max_grad_norm=1e9, loss=LossConfig(kl_coef=0.1))
        metrics = grpo_step(policy, torch.optim.SGD(params, lr=1.0), random_samples(6, seed=5), cfg, PhaseTimer())
        deltas.append(([b - p.detach() for b, p in zip(before, params)], metrics["kl"]))
    (plain, kl_plain), (fused, kl_fused) = deltas
    assert kl_fused == pytest.approx(kl_plain, rel=1e-5)  # the reference (adapter off) is unchanged too
    for a, b in zip(plain, fused):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_fused_lora_keeps_the_adapters_dropout():
    """With LoRA dropout the fused forward still drops (train mode: two calls differ, and differ
    from eval mode) and equals peft's forward in eval mode, where dropout is off."""
    import types

    from peft.tuners.lora.layer import Linear as LoraLinear

    from train.learn.lora import fuse_lora

    policy = tiny_policy(init=False, fuse=False)
    layer = next(m for m in policy.modules() if isinstance(m, LoraLinear))
    name = layer.active_adapters[0]
    layer.lora_dropout[name] = torch.nn.Dropout(0.5)
    torch.nn.init.normal_(layer.lora_B[name].weight)  # a nonzero low-rank term
    fuse_lora(policy)
    x = torch.randn(3, 5, layer.in_features)
    layer.train()
    first, second = layer(x), layer(x)
    assert not torch.allclose(first, second)
    layer.eval()
    torch.testing.assert_close(layer(x), types.MethodType(layer._unfused_forward.__func__, layer)(x))
    assert not torch.allclose(first, layer(x))


def test_epochs_take_several_optimizer_steps_against_the_sampling_policy():
    """Epoch 2 measures its ratio against the sampling policy's log-probs, not its own: the
    ratio moves off one; a single epoch keeps it at one, and two epochs move the adapter
    further than one."""
    def run(epochs: int):
        policy = tiny_policy()
        before = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}
        metrics = grpo_step(policy, optimizer_for(policy), random_samples(6), StepConfig(epochs=epochs),
                            PhaseTimer())
        moved = sum(float((p.detach() - before[n]).norm()) for n, p in policy.named_parameters() if n in before)
        return metrics, moved

    one, moved_one = run(1)
    two, moved_two = run(2)
    assert one["epochs"] == 1 and two["epochs"] == 2
    assert one["ratio_max"] == 1.0 and one["kl"] == 0.0
    assert two["ratio_max"] != 1.0 and two["kl"] > 0.0
    assert moved_two > moved_one * 1.5


def test_token_records_follow_each_sample_through_the_packing():
    """Micro-batches of 40 tokens pack the samples in another order: each sample's record is
    still its own tokens' old_log_prob (one plain fp32 forward per sample, before the update),
    its reference's (adapter off) and its advantage; an empty response has none."""
    from train.learn.advantages import grpo_valid_only
    from train.learn.logprobs import plain_logprobs
    from train.learn.step import Sample

    policy = tiny_policy(init=False)  # adapter on: trainer and reference differ
    samples = random_samples(6, seed=4)
    samples.insert(2, Sample([1, 2], [], reward=0.3, sibling_group="g0"))
    with torch.no_grad():
        want = [plain_logprobs(policy, s.prompt_ids, s.response_ids).tolist() if s.response_ids else None
                for s in samples]
        with policy.disable_adapter():
            want_ref = [plain_logprobs(policy, s.prompt_ids, s.response_ids).tolist() if s.response_ids else None
                        for s in samples]
    advantages = grpo_valid_only([s.reward for s in samples], [s.sibling_group for s in samples])
    tokens = []
    metrics = grpo_step(policy, optimizer_for(policy), samples, StepConfig(token_budget=40), PhaseTimer(), tokens=tokens)
    assert metrics["micro_batches"] > 1 and len(tokens) == len(samples) and tokens[2] is None
    for record, lp, ref, advantage, sample in zip(tokens, want, want_ref, advantages, samples):
        if record is None:
            continue
        assert len(record.trainer_logprobs) == len(sample.response_ids) == len(record.ratios)
        assert record.trainer_logprobs == pytest.approx(lp, abs=1e-4)
        assert record.ref_logprobs == pytest.approx(ref, abs=1e-4)
        assert record.ratios == pytest.approx([1.0] * len(lp), abs=1e-4)  # one epoch: the sampling weights
        assert record.advantage == advantage
