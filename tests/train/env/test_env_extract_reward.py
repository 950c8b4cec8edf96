"""The extraction contract (golden completions under cases/) and the reward table."""
from __future__ import annotations

import pytest

from train.env import extract, reward_for


def test_first_complete_block_is_the_code_and_text_before_it_the_plan(case):
    got = extract(case("completion_two_blocks.md"))
    assert got.has_code and got.code == 'print("first")\n'
    assert got.plan == "Plan: the first block is the code."


@pytest.mark.parametrize("name", ["completion_no_fence.md", "completion_unclosed_fence.md"])
def test_no_fence_or_unclosed_fence_is_no_code_with_empty_code(case, name):
    got = extract(case(name))
    assert (got.has_code, got.code, got.resources) == (False, "", None)


def test_declared_gpu_parses_into_resources(case):
    got = extract(case("completion_gpu_one.md"))
    assert got.resources == {"cpu": 8, "mem": 16, "ephemeral": 4, "gpu": 1}
    assert (got.decl_malformed, got.decl_miss_reason, got.decl_deps_ignored) == (False, None, False)


def test_gpu_zero_fails_the_gate_with_the_seeds_reason(case):
    got = extract(case("completion_gpu_zero.md"))
    assert got.resources is None and got.decl_malformed
    assert got.decl_miss_reason == "gpu=0 out of range 1..1"
    assert got.decl_deps_ignored  # lightgbm is declared but never installed


@pytest.mark.parametrize("name", ["completion_unclosed_script_block.md",
                                  "completion_duplicated_script_block.md"])
def test_broken_script_blocks_are_malformed_with_the_seeds_reason(case, name):
    got = extract(case(name))
    assert got.has_code and got.resources is None and got.decl_malformed
    assert got.decl_miss_reason == "malformed # /// script block (unclosed or duplicated)"


def test_code_without_a_declaration_is_not_malformed():
    got = extract("```python\nprint(1)\n```")
    assert (got.resources, got.decl_malformed, got.decl_miss_reason) == (None, False, None)


@pytest.mark.parametrize("status, exc_type, humanrank, reward", [
    ("ok", None, 0.0, 0.0),
    ("ok", None, 0.8125, 0.8125),
    ("ok", None, 1.0, 1.0),
    ("crashed", "ValueError", None, -0.5),
    ("timeout", "TimeoutError", None, -0.5),
    ("no_code", None, None, -0.5),
    ("no_submission", None, None, -0.5),
    ("invalid_submission", None, None, -0.5),
    ("crashed", "CpuIdleError", None, -0.2),
    ("crashed", "GpuIdleError", None, -0.2),
    ("crashed", "InfrastructureError", None, -1.0),
])
def test_reward_table(status, exc_type, humanrank, reward):
    assert reward_for(status, exc_type, humanrank) == reward


def test_ok_without_a_humanrank_in_range_is_refused():
    with pytest.raises(ValueError):
        reward_for("ok", None, 1.5)
