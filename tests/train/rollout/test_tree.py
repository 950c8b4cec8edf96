"""Tree search: parent choice, modes, and the per-expansion generator (the seed defect)."""
from __future__ import annotations

import math
import random

import pytest

from train.rollout.rng import expansion_rng, stable_seed
from train.rollout.tree import SearchSettings, TaskTree, choose_parent, plan_expansion, softmax

DESCRIPTION = "# mini\nPredict y."


def _node(i: int, status: str, reward: float, code: str = "print(1)") -> dict:
    return {"id": f"{i:012x}", "status": status, "reward": reward, "code": code, "depth": 0,
            "test_metric": 0.5 if status == "ok" else None, "exc_type": None if status == "ok" else "ValueError",
            "term_tail": "Traceback ...\nValueError: bad"}


def _round_one_tree(task: str = "t") -> TaskTree:
    tree = TaskTree(task)
    tree.add([_node(i, "ok" if i % 2 else "crashed", 0.6 if i % 2 else -0.5) for i in range(16)])
    return tree


def test_stable_seed_is_the_blake2b_of_the_tuple_repr():
    import hashlib

    expected = int.from_bytes(hashlib.blake2b(repr(("a", 1)).encode(), digest_size=8).digest(), "big")
    assert stable_seed("a", 1) == expected
    assert stable_seed("a", 1) != stable_seed("a", 2)


def test_each_round_draws_a_different_stream():
    """The seeds' defect: one Random(0) per round replayed the same draws every round."""
    firsts = {expansion_rng(0, rnd, "t", 0).random() for rnd in range(1, 50)}
    assert len(firsts) == 49
    assert expansion_rng(0, 2, "t", 0).random() == expansion_rng(0, 2, "t", 0).random()  # reproducible


def test_fresh_drafts_remain_possible_after_round_one():
    settings = SearchSettings(draft_prob=0.25)
    modes = [plan_expansion(_round_one_tree(), DESCRIPTION, rnd, 0, settings, run_seed=0).mode
             for rnd in range(2, 202)]
    drafts = modes.count("draft")
    # 200 independent expansions at p = 0.25: mean 50, sd ~6.1; far from both 0 and 200
    assert 25 <= drafts <= 75
    assert {"improve", "debug"} <= set(modes)


def test_a_shared_random0_would_never_draft_again():
    """What the defect looked like: re-seeding Random(0) each round gives one fixed choice."""
    settings = SearchSettings(draft_prob=0.25)
    choices = {choose_parent(_round_one_tree(), settings, random.Random(0)).parent is None for _ in range(20)}
    assert len(choices) == 1  # always the same outcome, every round: no exploration at all


def test_first_expansion_of_an_empty_tree_is_a_draft():
    exp = plan_expansion(TaskTree("t"), DESCRIPTION, 1, 0, SearchSettings(), run_seed=3)
    assert exp.mode == "draft" and exp.parent is None and exp.choice.probability == 1.0
    assert exp.messages[1]["content"].endswith("Write a first solution.")


def test_initial_drafts_are_forced_before_any_parent_choice():
    tree = _round_one_tree()
    settings = SearchSettings(initial_drafts=2, draft_prob=0.0)
    assert choose_parent(tree, settings, random.Random(1)).parent is None  # 1 expansion < 2
    tree.add([])
    assert choose_parent(tree, settings, random.Random(1)).parent is not None


def test_parent_choice_follows_the_softmax_of_rewards():
    tree = TaskTree("t")
    tree.add([_node(0, "ok", 1.0), _node(1, "crashed", -0.5)])
    settings = SearchSettings(draft_prob=0.0, softmax_temperature=0.5)
    rng = random.Random(7)
    picks = [choose_parent(tree, settings, rng).parent["id"] for _ in range(4000)]
    p_best = math.exp(1.0 / 0.5) / (math.exp(1.0 / 0.5) + math.exp(-0.5 / 0.5))  # 0.9526
    assert picks.count(f"{0:012x}") / 4000 == pytest.approx(p_best, abs=0.02)


def test_improve_prompt_carries_parent_code_and_result_debug_carries_term_tail():
    ok, bad = _node(0, "ok", 0.7, code="x = 41"), _node(1, "crashed", -0.5, code="y = 42")
    tree = TaskTree("t")
    tree.add([ok])
    exp = plan_expansion(tree, DESCRIPTION, 2, 0, SearchSettings(draft_prob=0.0), 0)
    assert exp.mode == "improve" and "x = 41" in exp.messages[1]["content"]
    assert "test metric = 0.5" in exp.messages[1]["content"]
    tree = TaskTree("t")
    tree.add([bad])
    exp = plan_expansion(tree, DESCRIPTION, 2, 0, SearchSettings(draft_prob=0.0), 0)
    assert exp.mode == "debug" and "y = 42" in exp.messages[1]["content"]
    assert "ValueError: bad" in exp.messages[1]["content"]


def test_nodes_without_code_are_never_parents():
    tree = TaskTree("t")
    tree.add([_node(0, "no_code", -0.5, code=""), _node(1, "crashed", -0.5, code="")])
    choice = choose_parent(tree, SearchSettings(draft_prob=0.0), random.Random(0))
    assert choice.parent is None and choice.candidates == 0


def test_softmax_helper():
    assert softmax([0.0, 0.0], 1.0) == [0.5, 0.5]
