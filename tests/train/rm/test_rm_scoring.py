"""RewardBench-style score and the weighted binomial standard error, against hand values."""
from __future__ import annotations

import math

import pytest

from train.rm.data import EvalRow
from train.rm.scoring import score_rows


def rows(section: str, subset: str, n: int) -> list[EvalRow]:
    return [EvalRow(prompt=f"{subset}{i}", chosen=(), rejected=(), id=f"{subset}{i}", subset=subset,
                    section=section) for i in range(n)]


def test_sections_weigh_equally_and_the_error_is_the_weighted_binomial_one():
    evals = rows("Chat", "a", 10) + rows("Safety", "b", 30)
    chosen = [1.0] * 8 + [0.0] * 2 + [1.0] * 15 + [0.0] * 15  # Chat 8/10, Safety 15/30
    score = score_rows(evals, chosen, [0.5] * 40)
    assert score.score == pytest.approx(100 * (0.5 * 0.8 + 0.5 * 0.5))
    assert score.se == pytest.approx(100 * math.sqrt(0.25 * 0.8 * 0.2 / 10 + 0.25 * 0.5 * 0.5 / 30))
    assert score.sections["Chat"]["score"] == pytest.approx(80) and score.sections["Safety"]["n"] == 30
    assert score.accuracy == pytest.approx(23 / 40) and score.n == 40


def test_a_tie_is_wrong_and_math_prm_weighs_as_much_as_all_code_subsets():
    evals = rows("Reasoning", "math-prm", 2) + rows("Reasoning", "hep-go", 6) + rows("Reasoning", "hep-rust", 2)
    chosen = [1, 1] + [0] * 6 + [1, 1]
    rejected = [0, 0] + [0] * 6 + [0, 1]  # the last row ties
    score = score_rows(evals, chosen, rejected)
    assert score.score == pytest.approx(100 * (0.5 * 1.0 + 0.5 * (6 / 8 * 0 + 2 / 8 * 0.5)))
