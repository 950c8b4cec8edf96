"""logprob_mismatch and node_tokens' trainer columns on hand-built rows: each figure computed
again in Python from the same token lists."""
from __future__ import annotations

import math

import numpy as np
import pytest


def trained(rows, rnd: int, task: str, node_id: str, sampler: list, trainer: list | None, ref: list | None = None,
            run: str = "r") -> None:
    rows.node(run, rnd, task, node_id)
    source, line = rows._source_ids[(run, rnd, task)], rows._lines[(run, rnd, task)]
    rows.insert("node_payloads", source_id=source, line_no=line, response_token_ids=list(range(len(sampler))),
                response_logprobs=[v for v in sampler if v is not None])
    if trainer is not None:
        rows.insert("node_train_tokens", source_id=source, line_no=line, run_id=run, step=rnd, advantage=0.5,
                    trainer_logprobs=trainer, ref_logprobs=ref or trainer, ratios=[1.0] * len(trainer))


def k3(lp: float, ref: float) -> float:
    d = max(min(ref - lp, 20.0), -20.0)
    return math.exp(d) - d - 1


def test_node_tokens_gain_the_trainers_columns_null_where_not_trained(rows):
    trained(rows, 1, "t", "a", [-0.5, -1.0], [-0.25, -3.0], ref=[-0.5, -2.0])
    trained(rows, 1, "t", "b", [-0.7], None)  # --no-learn / imported: no training record
    got = [(r["node_id"], r["position"], r["logprob"], r["trainer_logprob"], r["ref_logprob"]) for r in rows.query(
        'SELECT * FROM "node_tokens" ORDER BY "node_id", "position"')]
    assert got == [("a", 0, -0.5, -0.25, -0.5), ("a", 1, -1.0, -3.0, -2.0), ("b", 0, -0.7, None, None)]


def test_mismatch_figures_match_their_definitions(rows):
    sampler_a, trainer_a, ref_a = [-0.5, -1.0, -2.0], [-0.5, -1.25, -4.0], [-0.75, -1.0, -2.0]
    sampler_b, trainer_b = [-0.1, -0.2], [-0.1, -0.3]
    trained(rows, 1, "t", "a", sampler_a, trainer_a, ref_a)
    trained(rows, 1, "t", "b", sampler_b, trainer_b)
    trained(rows, 1, "t", "c", [-0.3], None)  # not trained: not counted
    trained(rows, 1, "u", "d", [-1.0], [-1.0])
    m = rows.one('SELECT * FROM "logprob_mismatch" WHERE "run_id" = ? AND "task" = ?', "r", "t")
    deltas = np.abs(np.array(trainer_a + trainer_b) - np.array(sampler_a + sampler_b))
    assert (m["trained_nodes"], m["trained_tokens"], m["compared_tokens"]) == (2, 5, 5)
    assert m["mult_prob_error"] == pytest.approx(np.exp(deltas).mean())
    assert m["mult_prob_error_max"] == pytest.approx(math.exp(2.0))
    assert m["mult_prob_error_p99"] == pytest.approx(np.quantile(np.exp(deltas), 0.99))  # linear, as quantile_cont
    assert m["share_abs_delta_gt_1"] == pytest.approx(1 / 5)
    kl = [k3(lp, r) for lp, r in zip(trainer_a + trainer_b, ref_a + trainer_b)]
    assert m["kl_to_ref_mean"] == pytest.approx(sum(kl) / len(kl))
    exact = rows.one('SELECT * FROM "logprob_mismatch" WHERE "task" = ?', "u")
    assert (exact["mult_prob_error"], exact["share_abs_delta_gt_1"], exact["kl_to_ref_mean"]) == (1.0, 0.0, 0.0)


def test_tokens_without_a_sampler_logprob_are_trained_but_not_compared(rows):
    trained(rows, 2, "t", "a", [-0.5, None, None], [-0.5, -9.0, -9.0])  # the sampler recorded one logprob
    m = rows.one('SELECT * FROM "logprob_mismatch"')
    assert (m["trained_tokens"], m["compared_tokens"]) == (3, 1)
    assert (m["mult_prob_error"], m["share_abs_delta_gt_1"]) == (1.0, 0.0)


def test_round_metrics_carries_the_token_weighted_headline(rows):
    trained(rows, 1, "t", "a", [-1.0, -1.0, -1.0], [-1.0, -1.0, -3.0])
    trained(rows, 1, "u", "b", [-1.0], [-1.5])
    trained(rows, 2, "t", "c", [-1.0], None)
    r1 = rows.one('SELECT * FROM "round_metrics" WHERE "round" = 1')
    errors = [1.0, 1.0, math.exp(2.0), math.exp(0.5)]
    assert r1["mult_prob_error"] == pytest.approx(sum(errors) / 4)
    assert r1["mult_prob_error_max"] == pytest.approx(math.exp(2.0))
    assert r1["share_abs_delta_gt_1"] == pytest.approx(1 / 4)
    r2 = rows.one('SELECT * FROM "round_metrics" WHERE "round" = 2')
    assert r2["mult_prob_error"] is None and r2["kl_to_ref_mean"] is None
