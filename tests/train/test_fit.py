"""train.fit's estimate of each phase's peak, against the peaks measured on the H200
(benchmarks/RESULTS.md), and its one-line refusal naming the setting to change."""
from __future__ import annotations

import json

import pytest

from train.fit import GIB, Plan, estimate, shape_of
from train.model_shapes import shape_config
from warehouse.errors import TerminalError

H200, H100 = int(140.4 * GIB), int(79.2 * GIB)  # what torch reports for each card's total
QWEN25_1P5B = {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12,
               "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": True}


def _step(config: dict, tokens: int) -> float:
    result = estimate(config, Plan(total_cap=tokens, rows=2, engine=False), H200)
    return next(p for p in result.phases if p.name == "step").peak / GIB


@pytest.mark.parametrize("config, tokens, measured", [
    (shape_config("qwen3_8b"), 12288, 29.3),  # update_bench run 1, sac: the 8B shape
    (shape_config("qwen3_8b"), 24576, 36.5),
    (shape_config("qwen3_8b"), 36864, 45.6),
    (shape_config("qwen3_8b"), 65536, 68.4),
    (QWEN25_1P5B, 36864, 15.6),  # the 1.5B shape, same run
    (QWEN25_1P5B, 65536, 23.1),
])
def test_the_step_estimate_is_within_ten_percent_of_each_measured_peak(config, tokens, measured):
    assert _step(config, tokens) == pytest.approx(measured, rel=0.10)


@pytest.mark.parametrize("tokens, measured", [(8192, 69.0), (10240, 68.9)])
def test_the_27b_step_estimate_is_within_five_percent_of_its_peaks_on_an_h100(tokens, measured):
    # big_bench.py update on one H100, 2026-12-06 (step 2 at 8,192: the optimizer's state allocated)
    assert _step(shape_config("qwen3_5_27b"), tokens) == pytest.approx(measured, rel=0.05)


def test_the_27b_step_that_failed_on_an_h100_is_refused_and_the_one_that_ran_is_not():
    config = shape_config("qwen3_5_27b")
    ran = estimate(config, Plan(total_cap=10240, rows=2, engine=False), H100)
    failed = estimate(config, Plan(total_cap=12288, rows=2, engine=False), H100)  # out of memory at 70.6 GiB
    assert ran.fits and not failed.fits
    assert "lower --set total_cap to at most 10240" in failed.problems[0]


def test_the_shapes_read_from_their_configs():
    s27 = shape_of(shape_config("qwen3_5_27b"))
    assert (s27.layers, s27.attn_layers, s27.linear_layers, s27.hidden, s27.ffn) == (64, 16, 48, 5120, 17408)
    assert (s27.heads, s27.kv_heads, s27.head_dim, s27.vocab, s27.gate) == (24, 4, 256, 248320, True)
    assert 26.5e9 < s27.params < 27.5e9  # the text model of the 27B (its vision tower excluded)
    assert s27.kv_bytes_per_token == 2 * 16 * 4 * 256 * 2  # full-attention layers only
    s8 = shape_of(shape_config("qwen3_8b"))
    assert 8.1e9 < s8.params < 8.3e9 and s8.kv_bytes_per_token == 2 * 36 * 8 * 128 * 2 and not s8.gate
    assert 14.5e9 < shape_of(shape_config("qwen3_14b")).params < 15.0e9


def test_the_27b_at_the_seeds_caps_fits_one_h200_with_the_base_offloaded_and_no_h100():
    config = shape_config("qwen3_5_27b")
    for cap in (36864, 45056):
        h200 = estimate(config, Plan(total_cap=cap, rows=64, offload=True, utilization=0.85), H200)
        assert h200.fits, h200.problems
        h100 = estimate(config, Plan(total_cap=cap, rows=64, offload=True, utilization=0.85), H100)
        assert any("step" in p and "total_cap" in p for p in h100.problems)
    # the policy's copy beside an engine at 0.85 of the device does not fit: offload it
    resident = estimate(config, Plan(total_cap=36864, rows=64, utilization=0.85), H200)
    assert any("policy_offload=host" in p for p in resident.problems)
    # an engine too small for one row at the cap: raise its share
    small = estimate(config, Plan(total_cap=36864, rows=64, utilization=0.38, offload=True), H200)
    assert any("raise --set gpu_memory_utilization" in p for p in small.problems)


def test_the_8b_fits_an_h200_at_hr32k_with_its_engine_beside_it():
    result = estimate(shape_config("qwen3_8b"), Plan(total_cap=45056, rows=64, utilization=0.6), H200)
    assert result.fits and result.kv_rows_at_once is None
    with_rows = estimate(shape_config("qwen3_8b"), Plan(total_cap=45056, rows=64, mean_row_tokens=10000), H200)
    # 65 GiB of KV pool at 144 KiB a token: 47 rows of 10,000 tokens at once, so the engine queues some of 64
    assert with_rows.kv_rows_at_once == 47


def test_train_run_refuses_before_loading_when_a_phase_cannot_fit(tmp_path, db_url, monkeypatch):
    import train.run
    from train.settings import RunOptions

    model = tmp_path / "m27"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(shape_config("qwen3_5_27b")))
    monkeypatch.setattr("train.factories.load_run_policy", lambda *a, **k: pytest.fail("loaded before the fit check"))
    opts = RunOptions(model=str(model), rounds=1, db_url=db_url, learn=True, health_gate=False, device="cpu",
                      sets={"device_memory_gib": "79.6"})
    with pytest.raises(TerminalError) as err:
        train.run.run(opts, log=lambda line: None)
    message = str(err.value)
    assert "\n" not in message and "m27 at hr24k_u6's caps" in message and "--set " in message
