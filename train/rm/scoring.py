"""RewardBench-style scoring: accuracy per subset, section and overall, with the seed's
weighted binomial standard error. Direction: maximize.

A row is correct when r(chosen) > r(rejected) (a tie is wrong, as in RewardBench). A section's
score is its subsets' accuracies weighted by their row counts, except Reasoning, where
`math-prm` weighs as much as all code subsets together (RewardBench v1). The overall score is
the mean over the sections present, so each row carries a weight and

    score = 100 * sum_g W_g * p_g
    se    = 100 * sqrt(sum_g W_g**2 * p_g * (1 - p_g) / n_g)

over subsets g (W_g the subset's total weight, p_g its accuracy, n_g its rows). The error is
descriptive of the fixed rows, not of training-seed variation (data root 004, section 3.1).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from train.rm.data import SECTIONS

PROXY_EVALUATOR = "rewardbench_proxy_{n}"  # the fixed subset of n rows
FINAL_EVALUATOR = "rewardbench_v1_score"  # every row, four sections


@dataclass
class Score:
    """One evaluation's result: score and error in points (0-100), per section too."""

    score: float
    se: float
    n: int
    sections: dict = field(default_factory=dict)  # section -> {"score", "se", "n"}
    accuracy: float = 0.0  # plain share of correct rows (unweighted)


def score_rows(rows, chosen_rewards, rejected_rewards) -> Score:
    """Score `rows` (EvalRow) from the rewards of their chosen and rejected answers."""
    correct = [float(c > r) for c, r in zip(chosen_rewards, rejected_rewards, strict=True)]
    by_subset = defaultdict(list)
    for row, ok in zip(rows, correct):
        by_subset[(row.section, row.subset)].append(ok)
    present = [s for s in SECTIONS if any(sec == s for sec, _ in by_subset)]
    sections = {s: _combine(_subset_weights({k: v for k, v in by_subset.items() if k[0] == s}), by_subset)
                for s in present}
    overall_weights = {k: w / len(present) for s in present
                       for k, w in _subset_weights({k: v for k, v in by_subset.items() if k[0] == s}).items()}
    total = _combine(overall_weights, by_subset)
    return Score(score=total["score"], se=total["se"], n=len(rows), sections=sections,
                 accuracy=sum(correct) / len(correct))


def _subset_weights(subsets: dict) -> dict:
    """Each subset's weight within its section (sums to 1)."""
    n = sum(len(v) for v in subsets.values())
    weights = {k: len(v) / n for k, v in subsets.items()}
    prm = [k for k in subsets if k[1] == "math-prm"]
    code = [k for k in subsets if k[1] != "math-prm"]
    if prm and code:  # RewardBench v1: math-prm as heavy as all code subsets together
        n_code = sum(len(subsets[k]) for k in code)
        weights = {k: 0.5 if k in prm else 0.5 * len(subsets[k]) / n_code for k in subsets}
    return weights


def _combine(weights: dict, by_subset: dict) -> dict:
    score = sum(w * _mean(by_subset[k]) for k, w in weights.items())
    var = sum(w * w * _mean(by_subset[k]) * (1 - _mean(by_subset[k])) / len(by_subset[k])
              for k, w in weights.items())
    return {"score": 100 * score, "se": 100 * math.sqrt(var), "n": sum(len(by_subset[k]) for k in weights)}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)
