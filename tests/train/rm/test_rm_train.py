"""`train rm` on CPU: learning, the soup, the wall clock, and the run's rows in the warehouse.

Small settings through --set / RMOptions (accumulation, sequence length, LoRA rank), a tiny
base built in the session (conftest), except the end-to-end CLI test, which uses the tiny
policy itself (`--model tiny`).
"""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

FAST = {"grad_accum": "2", "lr": "3e-3", "lora_rank": "8", "lora_alpha": "16", "lora_dropout": "0.0",
        "max_length": "96", "save_at": ""}


def options(base, eval_path, out, **sets):
    from train.rm.run import RMOptions, apply_sets

    opts = RMOptions(model=str(base), eval=str(eval_path), proxy_rows=64, device="cpu", out_dir=str(out),
                     run_id=sets.pop("run_id", "rm_test"), db_url=sets.pop("db_url", None),
                     export_root=sets.pop("export_root", None), members=int(sets.pop("members", 1)),
                     steps_per_member=sets.pop("steps_per_member", None))
    return apply_sets(opts, {**FAST, **{k: str(v) for k, v in sets.items()}})


def chance_accuracy(base, eval_path) -> float:
    """The untrained model's accuracy on the same proxy rows (fresh head, seed 42)."""
    from train.rm.data import proxy_rows, read_eval
    from train.rm.model import encode, load_reward_model, load_tokenizer, pair_rewards

    tokenizer = load_tokenizer(base)
    model = load_reward_model(base, torch.device("cpu"), 42, tokenizer.pad_token_id).eval()
    rows = proxy_rows(read_eval(eval_path).rows, 128)
    with torch.no_grad():
        wins = [float(torch.gt(*pair_rewards(model, encode(tokenizer, r.chosen, 96), encode(tokenizer, r.rejected, 96),
                                             torch.device("cpu"), True))) for r in rows]
    return sum(wins) / len(wins)


@pytest.fixture
def eval_128(tmp_path):
    from train.rm import synthetic

    rows = [json.loads(line) for line in synthetic.EVAL_FILE.read_text().splitlines()]
    picked = [r for s in ("Chat", "Chat Hard", "Safety", "Reasoning") for r in [x for x in rows if x["section"] == s][:32]]
    path = tmp_path / "eval128.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in picked))
    return path


@pytest.mark.slow
def test_64_steps_raise_proxy_accuracy_well_above_chance(tiny_base, eval_128, tmp_path):
    from train.rm.run import run_rm

    opts = options(tiny_base, eval_128, tmp_path / "out", max_steps=64, grad_accum=4, proxy_rows=128)
    report = run_rm(opts, log=lambda line: None)
    proxy = [e for e in report.evaluations if e["split"] == "proxy"]
    assert [e["progress"] for e in proxy] == [64] and proxy[0]["n"] == 128
    before = chance_accuracy(tiny_base, eval_128)
    assert before < 0.6  # a fresh head ranks at about chance
    assert proxy[0]["accuracy"] >= 0.68 and proxy[0]["accuracy"] >= before + 0.1
    assert report.stop_reason == "completed" and report.steps == 64


@pytest.mark.slow
def test_a_soup_of_two_members_exports_loads_and_scores(tiny_base, small_eval, tmp_path, db_url, monkeypatch):
    from transformers import AutoModelForSequenceClassification

    from train.rm import soup
    from train.rm.run import run_rm

    merged = []  # each member's merged parameters, as they enter the mean
    original_add = soup.RunningMean.add
    monkeypatch.setattr(soup.RunningMean, "add",
                        lambda self, sd: (merged.append({k: v.clone() for k, v in sd.items()}), original_add(self, sd))[1])
    report = run_rm(options(tiny_base, small_eval, tmp_path / "out", members=2, steps_per_member=3, db_url=db_url,
                            reference=74.568936), log=lambda line: None)
    assert [(a.progress, a.kind, a.members, a.dtype) for a in report.artifacts] == [
        (3, "full_model", 1, "bfloat16"), (6, "full_model", 2, "bfloat16")]
    assert len(merged) == 2
    loaded = AutoModelForSequenceClassification.from_pretrained(report.artifacts[-1].path)
    state = loaded.state_dict()
    assert next(loaded.parameters()).dtype == torch.bfloat16
    for key in ("score.weight", "model.layers.0.self_attn.q_proj.weight"):  # the heads too
        # the float32 mean, rounded once to bf16: within half a bf16 step of the exact mean. Not
        # bit-equal: the mean of two bf16 values often lies exactly between two bf16 values, and
        # the float32 running mean's last bit (fused multiply-add or not, by CPU) picks the side
        want = (merged[0][key].float() + merged[1][key].float()) / 2
        torch.testing.assert_close(state[key].float(), want, rtol=2**-8, atol=1e-7, msg=key)
    assert not torch.equal(merged[0]["score.weight"], merged[1]["score.weight"])  # seeds 42 and 43
    finals = [e for e in report.evaluations if e["split"] == "full"]
    assert [e["progress"] for e in finals] == [3, 6] and all(0 <= e["score"] <= 100 for e in finals)
    from warehouse.db import connect

    with connect(db_url, read_only=True) as con:  # the best official final against the reference, one query
        best = con.execute('SELECT "progress", "score", "reference_score" FROM "rm_best_final"').fetchall()
        life = con.execute('SELECT "state", "trainer" FROM "run_state" WHERE "run_id" = ?', [report.run_id]).fetchone()
    assert life == ("finished", "train rm")  # the trainer recorded its start and end
    top = max(e["score"] for e in finals)
    assert len(best) == 1 and best[0][1:] == (pytest.approx(top), 74.568936)
    assert best[0][0] in [e["progress"] for e in finals if e["score"] == top]


@pytest.mark.slow
def test_the_wall_clock_stops_training_and_the_run_still_scores_and_publishes(tiny_base, small_eval, tmp_path,
                                                                             db_url, monkeypatch):
    from train.rm import run as rm_run
    from warehouse.db import connect

    checks = iter([False] * 5 + [True] * 1000)  # the budget runs out before the 6th step
    monkeypatch.setattr(rm_run.Clock, "exhausted", lambda self: next(checks))
    report = rm_run.run_rm(options(tiny_base, small_eval, tmp_path / "out", max_steps=12, db_url=db_url,
                                   wall_clock=3600, reserve=600), log=lambda line: None)
    assert report.stop_reason == "wall_clock_budget_exhausted" and report.steps == 5
    assert [a.progress for a in report.artifacts] == [5]
    with connect(db_url, read_only=True) as con:
        budget = con.execute('SELECT "stop_reason", "steps", "wall_clock_s", "reserve_s" FROM "rm_budgets"').fetchall()
        finals = con.execute('SELECT "progress", "official" FROM "rm_evaluations" WHERE "split" = \'full\'').fetchall()
    assert budget == [("wall_clock_budget_exhausted", 5, 3600.0, 600.0)]
    assert finals == [(5, True)]
    receipts = sorted(p.name for p in (tmp_path / "out" / "evaluations").glob("*.complete"))
    assert receipts == ["formal_p00005_full.complete", "formal_p00005_proxy.complete",
                        "formal_p00005_proxy_rows.complete"]


@pytest.mark.slow
def test_a_soup_stops_before_a_member_that_would_not_fit_the_budget(tiny_base, small_eval, tmp_path, db_url,
                                                                   monkeypatch):
    from train.rm import run as rm_run
    from warehouse.db import connect

    monkeypatch.setattr(rm_run.Clock, "left", lambda self: 0.001)  # less than any member takes
    monkeypatch.setattr(rm_run.Clock, "exhausted", lambda self: False)
    report = rm_run.run_rm(options(tiny_base, small_eval, tmp_path / "out", members=3, steps_per_member=2,
                                   db_url=db_url, wall_clock=3600, reserve=600), log=lambda line: None)
    assert (report.stop_reason, report.steps, report.members) == ("wall_clock_budget_exhausted", 2, 1)
    assert [(a.progress, a.members) for a in report.artifacts] == [(2, 1)]
    with connect(db_url, read_only=True) as con:
        budget = con.execute('SELECT "stop_reason", "steps", "members", "snapshots_published" FROM "rm_budgets"').fetchall()
        official = con.execute('SELECT "official" FROM "rm_evaluations" WHERE "split" = \'full\'').fetchall()
    assert budget == [("wall_clock_budget_exhausted", 2, 1, 1)] and official == [(True,)]


def test_pairs_pack_up_to_the_token_budget_in_order():
    from train.rm.run import _packs

    pairs = [([1] * n, [2] * n) for n in (10, 10, 30, 5, 50, 1)]  # packed lengths 20, 20, 60, 10, 100, 2
    assert [len(p) for p in _packs(pairs, 0)] == [1] * 6
    assert [[len(c) for c, _ in p] for p in _packs(pairs, 60)] == [[10, 10], [30], [5], [50], [1]]
    assert [[len(c) for c, _ in p] for p in _packs(pairs, 100)] == [[10, 10, 30], [5], [50], [1]]
    assert sum(len(p) for p in _packs(pairs, 33)) == 6  # nothing dropped, a pair over the budget goes alone


def one_step(base, out, **settings):
    """One optimizer step of member 0 on the bundled pairs (tiny settings): (its step row, its
    LoRA and head weights)."""
    from train.rm.run import Clock, RMOptions, _setup, train_member

    opts = RMOptions(model=str(base), max_steps=1, grad_accum=6, lora_rank=4, lora_alpha=8, lora_dropout=0.0,
                     max_length=64, lr=1e-2, device="cpu", out_dir=str(out), **settings)
    rows = []
    publisher = type("Steps", (), {"step": lambda self, row: rows.append(row)})()
    model, _ = train_member(opts, _setup(opts, log=lambda line: None), 0, 0, Clock(None, 0.0), publisher,
                            log=lambda line: None)
    return rows[0], {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}


def test_a_step_over_packed_rows_equals_a_step_one_pair_per_forward(tiny_base, tmp_path):
    """Same pairs, same seed: one optimizer step with pairs packed several to a row gives the
    loss, accuracy and LoRA weights of the step with one pair per forward."""
    from train.rm.run import RMOptions, _setup

    ctx = _setup(RMOptions(model=str(tiny_base), max_length=64, device="cpu", out_dir=str(tmp_path)), log=lambda line: None)
    alone, alone_weights = one_step(tiny_base, tmp_path, pack_tokens=0)
    packed, packed_weights = one_step(tiny_base, tmp_path, pack_tokens=1000)  # 6 pairs of <= 128 tokens: one row
    assert packed["loss"] == pytest.approx(alone["loss"], abs=1e-5)
    assert packed["accuracy"] == alone["accuracy"]
    assert packed_weights.keys() == alone_weights.keys()
    assert all(torch.allclose(packed_weights[n], alone_weights[n], atol=1e-5) for n in alone_weights)
    assert max(len(c) + len(r) for c, r in ctx.pairs) <= 128  # so budget 1000 put all 6 in one row


def test_pack_tokens_needs_the_packed_layout(tiny_base, tmp_path):
    from train.rm.run import RMOptions, _setup
    from warehouse.errors import TerminalError

    with pytest.raises(TerminalError, match="pack_tokens=4096"):
        _setup(RMOptions(model=str(tiny_base), pack=False, pack_tokens=4096, out_dir=str(tmp_path)), log=print)


def test_the_padded_layout_takes_one_pair_per_forward_under_the_default_pack_budget(tiny_base, tmp_path):
    """`--set pack=false` alone: the default `pack_tokens` gives way (TRL's layout holds one pair
    per forward), and the step trains every pair: the same loss as one pair per packed row."""
    padded, _ = one_step(tiny_base, tmp_path, pack=False)
    alone, _ = one_step(tiny_base, tmp_path, pack_tokens=0)
    assert padded["pairs"] == 6
    assert padded["loss"] == pytest.approx(alone["loss"], abs=1e-5)


def test_an_unknown_attention_kernel_is_refused_before_training(tiny_base, tmp_path):
    from train.rm.run import RMOptions, _setup
    from warehouse.errors import TerminalError

    with pytest.raises(TerminalError, match="attention_kernel=cudnn: one of flash, sdpa"):
        _setup(RMOptions(model=str(tiny_base), attention_kernel="cudnn", out_dir=str(tmp_path)), log=print)


def test_fused_lora_and_the_sdpa_kernel_train_like_the_defaults_off(tiny_base, tmp_path):
    """`fuse_lora` (one addmm for the low-rank term) and `attention_kernel` change kernels, not
    the step (dropout 0 here, so the draws do not differ)."""
    base, base_weights = one_step(tiny_base, tmp_path, fuse_lora=False, pack_tokens=0)
    for settings in (dict(fuse_lora=True), dict(fuse_lora=True, attention_kernel="sdpa", pack_tokens=1000)):
        row, weights = one_step(tiny_base, tmp_path, **settings)
        assert row["loss"] == pytest.approx(base["loss"], abs=1e-5)
        assert all(torch.allclose(weights[n], base_weights[n], atol=1e-5) for n in base_weights)


def test_selective_checkpointing_trains_like_full_checkpointing(tiny_base, tmp_path):
    """`selective_checkpointing` (attention outputs kept, the rest recomputed, as the GRPO
    update does) changes memory and time, not the step: same loss and LoRA weights."""
    settings = dict(grad_checkpointing=True, pack_tokens=1000)
    base, base_weights = one_step(tiny_base, tmp_path, **settings)
    for bf16_inputs in (False, True):  # fp32 on CPU: the casts are no-ops, the wiring runs
        row, weights = one_step(tiny_base, tmp_path, selective_checkpointing=True, lora_bf16_inputs=bf16_inputs,
                                **settings)
        assert row["loss"] == pytest.approx(base["loss"], abs=1e-6)
        assert all(torch.allclose(weights[n], base_weights[n], atol=1e-6) for n in base_weights)
