import pytest

from train.learn.advantages import grpo_valid_only


def test_reward_minus_group_mean_without_std():
    rewards = [0.2, 0.6, -0.5, 1.0, 0.0]
    groups = ["a", "a", "a", "b", "b"]
    mean_a = (0.2 + 0.6 - 0.5) / 3
    assert grpo_valid_only(rewards, groups) == pytest.approx(
        [0.2 - mean_a, 0.6 - mean_a, -0.5 - mean_a, 0.5, -0.5])


def test_infra_failures_leave_the_baseline_and_get_zero():
    rewards = [0.4, 0.8, -1.0, -1.0]
    assert grpo_valid_only(rewards, ["g"] * 4) == pytest.approx([-0.2, 0.2, 0.0, 0.0])


def test_groups_without_spread_give_zero():
    rewards = [-0.5, -0.5, -0.5, -1.0, 0.3, 0.3]
    groups = ["a", "a", "a", "a", "b", "b"]
    assert grpo_valid_only(rewards, groups) == [0.0] * 6


def test_mismatched_lengths_are_an_error():
    with pytest.raises(ValueError, match="2 rewards but 1"):
        grpo_valid_only([0.1, 0.2], ["a"])
