"""The update's variant: kept layers from the memory left, compiled norms inside the update only,
the choice in step_metrics after a `train run`."""
import json

import pytest
import torch

from learn_helpers import optimizer_for, random_samples, tiny_policy, one_thread  # noqa: F401 (autouse)
from tests.train.learn.test_learn_run_wiring import _opts
from tests.train.test_run import CannedBackend, model_dir, tiny_model, tiny_tokenizer  # noqa: F401
from train.learn.lora import compiled_norms, keep_last_layers
from train.learn.step import StepConfig, grpo_step
from train.learn.timing import PhaseTimer
from train.learn.variant import (GIB, ModelShape, UpdateVariant, UpdateVariants, VariantSetting,
                                 choose_variant, layers_that_fit, resumed_base)
from warehouse.errors import TerminalError

QWEN3_8B = ModelShape(layers=36, hidden=4096, intermediate=12288)
TOKENS = 36864
KEPT_8B = 6 * 2 * (4096 + 12288) * TOKENS  # 6 bf16 values per (hidden + intermediate) unit per token


def test_kept_layers_are_what_the_headroom_fits_after_the_margin():
    # 120 GiB free, a 28 GiB step without kept layers, 10% margin: 80 GiB for 6.75 GiB layers
    keep = layers_that_fit(QWEN3_8B, TOKENS, 120 * GIB, 28 * GIB)
    assert keep == 11 and keep * KEPT_8B <= 80 * GIB < (keep + 1) * KEPT_8B
    assert layers_that_fit(QWEN3_8B, TOKENS, 40 * GIB, 35 * GIB) == 0  # less than the margin left
    assert layers_that_fit(QWEN3_8B, 1024, 1000 * GIB, 28 * GIB) == 36  # at most every layer


def test_cpu_fsdp_and_the_first_step_keep_nothing_and_settings_win():
    cpu = choose_variant(QWEN3_8B, TOKENS, "cpu", None, None)
    assert (cpu.keep_layers, cpu.compile_norms, cpu.name) == (0, False, "sac+fused")
    first = choose_variant(QWEN3_8B, TOKENS, "cuda", 120 * GIB, None)
    assert (first.keep_layers, first.compile_norms, first.name) == (0, True, "sac+fused+normc")
    sharded = choose_variant(QWEN3_8B, TOKENS, "cuda", 120 * GIB, 28 * GIB, sharded=True)
    assert (sharded.keep_layers, sharded.compile_norms, sharded.note) == (0, False, "fsdp: no layers kept")
    measured = choose_variant(QWEN3_8B, TOKENS, "cuda", 120 * GIB, 28 * GIB)
    assert measured.name == "sac+fused+keep11+normc" and not measured.note
    set_ = choose_variant(QWEN3_8B, TOKENS, "cpu", None, None, VariantSetting(keep_layers=40, compile_norms=True))
    assert (set_.keep_layers, set_.compile_norms, set_.note) == (36, True, "set")
    off = choose_variant(QWEN3_8B, TOKENS, "cuda", 120 * GIB, 28 * GIB, VariantSetting(compile_norms=False))
    assert off.name == "sac+fused+keep11"


def test_the_first_step_measures_then_later_steps_keep_what_fits_and_never_more():
    variants = UpdateVariants(QWEN3_8B, TOKENS)
    first = variants.choose("cuda", 120 * GIB)
    assert first.keep_layers == 0 and first.note.startswith("measuring")
    variants.measured(first, TOKENS // 2, 14 * GIB)  # half the budget: scaled up to 28 GiB
    assert variants.base_peak() == 28 * GIB
    assert variants.choose("cuda", 120 * GIB).keep_layers == 11
    assert variants.choose("cuda", 200 * GIB).keep_layers == 11  # more room: not raised again
    assert variants.choose("cuda", 60 * GIB).keep_layers == layers_that_fit(QWEN3_8B, TOKENS, 60 * GIB, 28 * GIB) == 3
    variants.measured(UpdateVariant(keep_layers=3), TOKENS, 60 * GIB)  # a step with kept layers is no base
    assert variants.base_peak() == 28 * GIB


def test_a_resumed_base_is_the_widest_step_that_kept_no_layers():
    extras = [{"update_keep_layers": 0, "update_peak_gib": 14.0, "largest_micro_batch": 18000},
              {"update_keep_layers": 11, "update_peak_gib": 60.0, "largest_micro_batch": 36864},  # kept: no base
              {"update_keep_layers": 0, "update_peak_gib": 20.0, "largest_micro_batch": 30000},
              {"update_keep_layers": 0, "update_peak_gib": 9.0, "largest_micro_batch": 12000},  # narrower
              {"update_keep_layers": 0, "largest_micro_batch": 36864},  # CPU: no peak recorded
              {"update_variant": "sac+fused"}]
    assert resumed_base(extras) == (30000, 20 * GIB)
    assert resumed_base(extras[4:]) is None and resumed_base([]) is None
    variants = UpdateVariants(QWEN3_8B, TOKENS, base=resumed_base(extras))
    assert variants.choose("cuda", 120 * GIB).keep_layers == layers_that_fit(QWEN3_8B, TOKENS, 120 * GIB,
                                                                              20 * GIB * TOKENS // 30000) > 0


def test_a_resumed_run_keeps_layers_from_the_peak_its_lineage_measured(db_url, model_dir, monkeypatch, tmp_path):
    import train.run
    from train.learn import variant
    from warehouse.db import connect

    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer))
    train.run.run(_opts(db_url, model_dir, tmp_path, "r_measured", 1), log=lambda line: None)
    measured = {"update_keep_layers": 0, "update_peak_gib": 14.0, "largest_micro_batch": 18000}  # as on a GPU
    with connect(db_url) as con:
        con.execute('UPDATE "step_metrics" SET "extra" = ? WHERE "run_id" = \'r_measured\'', [json.dumps(measured)])
    bases, choose = [], variant.UpdateVariants.choose
    monkeypatch.setattr(variant.UpdateVariants, "choose",
                        lambda self, *a: bases.append(self.base) or choose(self, *a))
    train.run.run(_opts(db_url, model_dir, tmp_path, "r_resumed", 1, resume_from="r_measured:1"),
                  log=lambda line: None)
    assert bases == [(18000, 14 * GIB)]
    bases.clear()
    train.run.run(_opts(db_url, model_dir, tmp_path, "r_fresh", 1), log=lambda line: None)
    assert bases == [None]  # not resumed: the first step measures


def test_settings_are_validated_and_recorded(tmp_path):
    from train.learn.learner import variant_setting
    from train.settings import Knobs, RunOptions, resolve_settings

    _, knobs, overrides = resolve_settings(RunOptions(sets={"keep_layers": "4", "compile_norms": "off"}))
    assert variant_setting(knobs) == VariantSetting(keep_layers=4, compile_norms=False)
    assert overrides["keep_layers"] == 4 and overrides["compile_norms"] == "off"
    assert variant_setting(Knobs()) == VariantSetting()  # auto
    with pytest.raises(TerminalError, match="compile_norms=yes: use auto, on or off"):
        variant_setting(Knobs(compile_norms="yes"))
    with pytest.raises(TerminalError, match="keep_layers=-2"):
        variant_setting(Knobs(keep_layers=-2))


def _layer_flags(policy) -> list[bool]:
    return [m.gradient_checkpointing for m in policy.modules() if type(m).__name__.endswith("DecoderLayer")]


def _gradients(keep: int) -> tuple[list[bool], list[torch.Tensor]]:
    policy = tiny_policy(init=False)
    assert keep_last_layers(policy, keep) == keep
    grpo_step(policy, torch.optim.SGD([p for p in policy.parameters() if p.requires_grad], lr=0.0),
              random_samples(6, seed=2), StepConfig(token_budget=10_000, max_grad_norm=1e9), PhaseTimer())
    return _layer_flags(policy), [p.grad.clone() for p in policy.parameters() if p.requires_grad]


def test_kept_layers_change_which_layers_recompute_not_the_gradient():
    (flags0, grads0), (flags1, grads1) = _gradients(0), _gradients(1)
    assert flags0 == [True, True] and flags1 == [True, False]
    assert any(float(g.abs().max()) > 1e-6 for g in grads0)
    for a, b in zip(grads0, grads1):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


class FakeCompile:
    """Stands in for torch.compile: counts the calls and whether grad was on (the update's
    passes) or off (old_log_prob, ref, generation)."""

    def __init__(self):
        self.grad_modes = []

    def __call__(self, fn, **kwargs):
        def compiled(*args, **kw):
            self.grad_modes.append(torch.is_grad_enabled())
            return fn(*args, **kw)
        return compiled


def _norms(policy) -> list:
    return [m for m in policy.modules() if type(m).__name__.endswith("RMSNorm")]


def test_norms_are_compiled_inside_and_eager_again_after_even_on_error(monkeypatch):
    fake = FakeCompile()
    monkeypatch.setattr(torch, "compile", fake)
    policy = tiny_policy()
    ids = torch.tensor([[1, 2, 3]])
    with compiled_norms(policy) as count:
        assert count == len(_norms(policy)) == 5  # 2 per layer + the final norm
        policy(input_ids=ids)
    assert len(fake.grad_modes) == 5
    assert all(m._compiled_call_impl is None for m in _norms(policy))
    policy(input_ids=ids)
    assert len(fake.grad_modes) == 5  # eager after: no call went through the compiled path
    with pytest.raises(RuntimeError, match="boom"), compiled_norms(policy):
        raise RuntimeError("boom")
    assert all(m._compiled_call_impl is None for m in _norms(policy))
    with compiled_norms(policy, enabled=False) as count:
        assert count == 0 and all(m._compiled_call_impl is None for m in _norms(policy))


def test_the_step_compiles_the_norms_for_the_update_only(monkeypatch):
    fake = FakeCompile()
    monkeypatch.setattr(torch, "compile", fake)
    policy = tiny_policy()
    grpo_step(policy, optimizer_for(policy), random_samples(6), StepConfig(token_budget=10_000, compile_norms=True),
              PhaseTimer())
    # one micro-batch: forward (5 norms) and the checkpointed recompute in backward (4 layer norms)
    assert fake.grad_modes == [True] * 9
    assert all(m._compiled_call_impl is None for m in _norms(policy))


def test_train_run_records_the_variant_in_step_metrics(db_url, model_dir, monkeypatch, tmp_path):
    import train.run
    from warehouse.db import connect

    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer))
    run_opts = _opts(db_url, model_dir, tmp_path, "r_variant", 2)
    train.run.run(run_opts, log=lambda line: None)
    set_opts = _opts(db_url, model_dir, tmp_path, "r_kept", 1)
    set_opts.sets["keep_layers"] = "1"
    train.run.run(set_opts, log=lambda line: None)
    with connect(db_url, read_only=True) as con:
        rows = con.execute('SELECT "run_id", "step", "extra" FROM "step_metrics" '
                           'WHERE "run_id" IN (\'r_variant\', \'r_kept\') ORDER BY "run_id" DESC, "step"').fetchall()
    extras = [(run_id, step, json.loads(extra)) for run_id, step, extra in rows]
    assert [(r, s) for r, s, _ in extras] == [("r_variant", 1), ("r_variant", 2), ("r_kept", 1)]
    for _, _, extra in extras[:2]:
        assert (extra["update_variant"], extra["update_keep_layers"], extra["update_compile_norms"]) == \
            ("sac+fused", 0, False)
        assert extra["update_variant_note"] == "cpu: no layers kept" and "update_peak_gib" not in extra
    kept = extras[2][2]
    assert (kept["update_variant"], kept["update_keep_layers"], kept["update_variant_note"]) == \
        ("sac+fused+keep1", 1, "set")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_compiled_norms_in_the_update_beside_the_generators_captured_decode_on_gpu(tiny_model, tiny_tokenizer):
    """Issue 18: the update's compiled norms and the generation's CUDA-graph decode (paged path)
    on one shared module, three rounds (the second step keeps both layers: the decode sees the
    flags change): after each update the captured decode still samples what eager decoding does."""
    import copy

    from train.generate.base import GenRequest, SamplingConfig
    from train.generate.hf import HFBackend
    from train.learn.lora import make_optimizer
    from train.policy.lora import add_lora
    from train.learn.step import Sample
    from train.learn.learner import Learner, prepare_update
    from train.settings import Knobs

    policy = add_lora(copy.deepcopy(tiny_model).to("cuda"), rank=8, alpha=16, init=False)
    config = StepConfig(token_budget=4096)
    learner = Learner(type("P", (), {"model": policy})(), make_optimizer(policy, 1e-2), config,
                      variants=prepare_update(policy, Knobs(), config))
    greedy = SamplingConfig(max_new_tokens=16, temperature=0.0)
    request = [GenRequest([{"role": "user", "content": "Write a first solution."}], 2)]
    keeps = []
    for step_no in (1, 2, 3):
        eager = HFBackend(policy, tiny_tokenizer, paged=False).generate(request, greedy)[0]
        tokens = [c.response_token_ids for c in eager]
        assert [c.response_token_ids for c in HFBackend(policy, tiny_tokenizer).generate(request, greedy)[0]] == tokens
        samples = [Sample(c.prompt_token_ids, c.response_token_ids, float(i), "g") for i, c in enumerate(eager)]
        metrics = learner.step(samples, PhaseTimer(), step_no)
        assert metrics["update_compile_norms"] and metrics["update_variant"].endswith("+normc")
        assert all(m._compiled_call_impl is None for m in _norms(policy))
        keeps.append(metrics["update_keep_layers"])
    assert keeps == [0, 2, 2]
