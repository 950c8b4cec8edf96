"""logprob_mismatch and node_tokens' trainer columns on hand-built rows: each figure computed
again in Python from the same token lists."""
from __future__ import annotations

import math

import numpy as np
import pytest


def trained(rows, rnd: int, task: str, node_id: str, sampler: list, trainer: list | None, ref: list | None = None,
            run: str = "r") -> None:
    rows.node(run, rnd, task, node_id, n_response_tokens=len(sampler))
    source, line = rows._source_ids[(run, rnd, task)], rows._lines[(run, rnd, task)]
    rows.insert("node_payloads", source_id=source, line_no=line, response_token_ids=list(range(len(sampler))),
                response_logprobs=[v for v in sampler if v is not None])
    if trainer is not None:
        ref = ref or trainer
        rows.insert("node_train_tokens", source_id=source, line_no=line, run_id=run, step=rnd, advantage=0.5,
                    trainer_logprobs=trainer, ref_logprobs=ref, ratios=[1.0] * len(trainer), **sums(sampler, trainer, ref))


def sums(sampler: list, trainer: list, ref: list) -> dict:
    """The per-node sums ingest derives (ingest.load.TRAIN_TOKEN_SUMS), computed in Python."""
    deltas = [abs(t - s) for s, t in zip(sampler, trainer) if s is not None]
    return {"compared_tokens": len(deltas), "mult_prob_error_sum": sum(math.exp(d) for d in deltas) if deltas else None,
            "mult_prob_error_max": max(math.exp(d) for d in deltas) if deltas else None,
            "abs_delta_gt_1": sum(d > 1 for d in deltas), "kl_to_ref_sum": sum(k3(t, r) for t, r in zip(trainer, ref))}


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
    assert r1["kl_to_ref_mean"] == 0.0
    r2 = rows.one('SELECT * FROM "round_metrics" WHERE "round" = 2')
    assert r2["mult_prob_error"] is None and r2["kl_to_ref_mean"] is None


def test_the_record_path_lands_the_arrays_and_derives_the_sums_the_views_agree_on(db_url):
    """Node records with the trainer's keys, through ingest.records as train run writes them."""
    from ingest.records import load_task_round, upsert_run
    from warehouse.db import connect, transaction

    sampler, trainer, ref = [-0.5, -1.0, -2.0, -0.1], [-0.5, -1.25, -4.0, -0.2], [-0.75, -1.0, -2.0, -0.2]
    records = [{"id": "a", "step": 0, "parent_id": None, "sibling_group": "g", "mode": "draft", "status": "ok",
                "reward": 0.5, "response_token_ids": [1, 2, 3, 4], "response_logprobs": sampler, "policy_version": 3,
                "train_step": 4, "advantage": 0.25, "trainer_logprobs": trainer, "ref_logprobs": ref,
                "ratios": [1.0, 1.0, 1.0, 1.0]},
               {"id": "b", "step": 0, "parent_id": None, "sibling_group": "g", "mode": "draft", "status": "ok",
                "reward": 0.5, "response_token_ids": [5], "response_logprobs": [-0.3], "policy_version": 3}]
    with connect(db_url) as con:
        def work():
            upsert_run(con, {"run_id": "r", "arm": None, "kind": "training"})
            load_task_round(con, run_id="r", round=4, task="t", records=records, summary=None,
                            source_path="train://r/round_4/t")
        transaction(con, work)
        versions = con.execute('SELECT "node_id", "policy_version", "extra" FROM "nodes" ORDER BY 1').fetchall()
        stored = con.execute('SELECT "step", "advantage", "trainer_logprobs", "ref_logprobs", "compared_tokens", '
                             '"mult_prob_error_sum", "mult_prob_error_max", "abs_delta_gt_1", "kl_to_ref_sum" '
                             'FROM "node_train_tokens"').fetchall()
        view = con.execute('SELECT "mult_prob_error", "share_abs_delta_gt_1", "kl_to_ref_mean" '
                           'FROM "logprob_mismatch"').fetchone()
        headline = con.execute('SELECT "mult_prob_error", "share_abs_delta_gt_1", "kl_to_ref_mean" '
                               'FROM "round_metrics"').fetchone()
    assert versions == [("a", 3, None), ("b", 3, None)]  # the trainer's keys land in columns, not in extra
    assert len(stored) == 1  # b was not trained
    step, advantage, lp, rp, *derived = stored[0]
    assert (step, advantage) == (4, 0.25)
    assert lp == pytest.approx(trainer) and rp == pytest.approx(ref)  # float32 arrays
    want = sums(sampler, trainer, ref)
    assert derived == pytest.approx([want[k] for k in ("compared_tokens", "mult_prob_error_sum", "mult_prob_error_max",
                                                       "abs_delta_gt_1", "kl_to_ref_sum")], rel=1e-6)  # float32
    assert headline == pytest.approx(view, rel=1e-12)  # both from the stored float32 arrays
