"""task_round_metrics on hand-built rows: NULL on empty denominators, ties, the arm's cap."""
from __future__ import annotations

import pytest

Q = 'SELECT * FROM "task_round_metrics" WHERE "run_id" = ? AND "round" = ? AND "task" = ?'


@pytest.fixture
def capped(rows):
    """Run r1 of arm hr_b (response cap 12288): one task-round with two groups."""
    rows.run("r1", arm="hr_b")
    rows.task_round("r1", 1, "t")
    spec = [  # id, group, mode, status, reward, oriented, test_metric, tokens
        ("b", "g1", "draft", "ok", 0.5, 0.9, 0.9, 100),
        ("a", "g1", "draft", "ok", 0.7, 0.9, 0.8, 12288),   # ties b on oriented, smaller id
        ("c", "g1", "draft", "crashed", -0.5, None, None, 12290),
        ("d", "g2", "improve", "crashed", -0.5, None, None, 12288),
        ("e", "g2", "improve", "crashed", -0.5, None, None, 50),
    ]
    for node_id, group, mode, status, reward, oriented, metric, tokens in spec:
        rows.node("r1", 1, "t", node_id, sibling_group=group, mode=mode, status=status,
                  reward=reward, oriented=oriented, test_metric=metric, n_response_tokens=tokens)
    return rows


def test_rates_means_and_counts(capped):
    m = capped.one(Q, "r1", 1, "t")
    assert (m["nodes"], m["valid"], m["groups"]) == (5, 2, 2)
    assert m["valid_rate"] == pytest.approx(2 / 5)
    assert m["crash_rate"] == pytest.approx(3 / 5)
    assert m["timeout_rate"] == 0
    assert m["draft_rate"] == pytest.approx(3 / 5) and m["improve_rate"] == pytest.approx(2 / 5)
    assert m["reward_node_mean"] == pytest.approx((0.5 + 0.7 - 1.5) / 5)
    assert m["valid_reward_mean"] == pytest.approx(0.6)
    assert m["draft_reward_mean"] == pytest.approx(0.6)
    assert m["reward_best"] == 0.7
    assert m["groups_with_signal_rate"] == pytest.approx(1 / 2)  # g2 all -0.5
    assert m["reward_spread"] == 1 and m["complete"] == 1


def test_best_test_metric_tie_goes_to_the_smallest_id(capped):
    assert capped.one(Q, "r1", 1, "t")["best_test_metric_recount"] == 0.8  # node a, not b


def test_cap_from_the_runs_arm(capped):
    m = capped.one(Q, "r1", 1, "t")
    assert m["response_cap"] == 12288
    assert m["resp_clip_rate"] == pytest.approx(3 / 5)  # 12288, 12290, 12288
    assert m["clipped_at_cap"] == 2
    assert m["mean_response_tokens"] == pytest.approx((100 + 12288 + 12290 + 12288 + 50) / 5)


def test_a_runs_own_response_cap_override_wins(rows):
    """`train run --model tiny` records response_cap=256 in runs.overrides: clip against it."""
    rows.run("r3", arm="hr24k_u6", overrides='{"response_cap": 256}')
    for node_id, tokens in (("a", 256), ("b", 100), ("c", 300)):
        rows.node("r3", 1, "t", node_id, status="ok", reward=0.3, n_response_tokens=tokens)
    m = rows.one(Q, "r3", 1, "t")
    assert m["response_cap"] == 256
    assert m["resp_clip_rate"] == pytest.approx(2 / 3) and m["clipped_at_cap"] == 1


@pytest.mark.parametrize("arm", [None, "tree_grpo_9b_spooky", "no_such_arm"])
def test_unknown_arm_or_cap_gives_null_not_a_guess(rows, arm):
    rows.run("r2", arm=arm)
    rows.node("r2", 1, "t", "x", status="ok", reward=0.3, n_response_tokens=99999)
    m = rows.one(Q, "r2", 1, "t")
    assert m["resp_clip_rate"] is None and m["clipped_at_cap"] is None
    assert m["complete"] == 0  # records without any task_rounds row: no summary


def test_task_round_without_records_has_zero_counts_and_null_rates(rows):
    rows.run("r3", arm="hr_b")
    rows.task_round("r3", 11, "stub", summary=False)  # empty stub jsonl
    m = rows.one(Q, "r3", 11, "stub")
    assert (m["nodes"], m["valid"], m["groups"], m["reward_spread"], m["complete"]) == (0, 0, 0, 0, 0)
    assert m["clipped_at_cap"] == 0
    for column in ("valid_rate", "crash_rate", "draft_rate", "valid_reward_mean",
                   "reward_node_mean", "reward_best", "best_test_metric_recount",
                   "groups_with_signal_rate", "mean_response_tokens", "resp_clip_rate"):
        assert m[column] is None, column


def test_no_ok_node_gives_null_valid_means(rows):
    rows.run("r4", arm="hr_b")
    rows.node("r4", 1, "t", "x", status="crashed", mode="draft", reward=-0.5, sibling_group="g")
    rows.node("r4", 1, "t", "y", status="crashed", mode="draft", reward=-0.5, sibling_group="g")
    m = rows.one(Q, "r4", 1, "t")
    assert m["valid_reward_mean"] is None and m["draft_reward_mean"] is None
    assert m["best_test_metric_recount"] is None
    assert m["valid_rate"] == 0 and m["reward_spread"] == 0 and m["groups_with_signal_rate"] == 0
