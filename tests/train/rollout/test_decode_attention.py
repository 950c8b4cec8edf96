"""The grouped-query decode attention against transformers' SDPA attention, and its switch."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from transformers import DynamicCache
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from train.generate.decode_attention import (NAME, _configs, decode_attention, gqa_decode_forward,
                                      set_decode_kernel)
from train.generate.sampler import _decode_step, _prefill, make_batch


def _qkv(heads: int, kv_heads: int, q_len: int = 1, slots: int = 11, batch: int = 3, dim: int = 8):
    g = torch.Generator().manual_seed(heads * 100 + kv_heads * 10 + q_len)
    q = torch.randn(batch, heads, q_len, dim, generator=g)
    k, v = (torch.randn(batch, kv_heads, slots, dim, generator=g) for _ in range(2))
    return SimpleNamespace(num_key_value_groups=heads // kv_heads, is_causal=True, training=False), q, k, v


def _bool_mask(batch: int, slots: int, q_len: int = 1) -> torch.Tensor:
    # row r sees slots [r, slots): left padding of r slots
    mask = torch.ones(batch, 1, q_len, slots, dtype=torch.bool)
    for row in range(batch):
        mask[row, ..., :row] = False
    return mask


@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (4, 2), (8, 2), (6, 1)])
@pytest.mark.parametrize("mask_kind", ["bool", "float", "none"])
def test_decode_step_equals_sdpa_attention(heads, kv_heads, mask_kind):
    module, q, k, v = _qkv(heads, kv_heads)
    mask = _bool_mask(q.shape[0], k.shape[2])
    mask = {"bool": mask, "none": None,
            "float": torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)}[mask_kind]
    want, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=0.3)
    got, _ = gqa_decode_forward(module, q, k, v, mask, scaling=0.3)
    assert got.shape == want.shape == (q.shape[0], 1, heads, q.shape[-1])
    assert torch.allclose(got, want, atol=1e-5)
    # a masked slot changes nothing: the last row cannot see slot 0
    if mask_kind != "none":
        k2, v2 = k.clone(), v.clone()
        k2[-1, :, 0], v2[-1, :, 0] = 1e3, -1e3
        again, _ = gqa_decode_forward(module, q, k2, v2, mask, scaling=0.3)
        assert torch.allclose(again, got, atol=1e-5)


@pytest.mark.parametrize("heads,kv_heads", [(4, 2), (8, 2)])
def test_the_sdpa_kernel_gives_the_same_attention(heads, kv_heads):
    module, q, k, v = _qkv(heads, kv_heads)
    mask = _bool_mask(q.shape[0], k.shape[2])
    want, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=0.3)
    set_decode_kernel("sdpa")
    try:
        got, _ = gqa_decode_forward(module, q, k, v, mask, scaling=0.3)
    finally:
        set_decode_kernel("matmul")
    assert torch.allclose(got, want, atol=1e-5)
    with pytest.raises(ValueError, match="expected one of matmul, sdpa"):
        set_decode_kernel("flash")


def test_prompt_queries_go_to_sdpa_unchanged():
    module, q, k, v = _qkv(4, 2, q_len=5, slots=5)
    want, _ = sdpa_attention_forward(module, q, k, v, None, scaling=0.25)
    got, _ = gqa_decode_forward(module, q, k, v, None, scaling=0.25)
    assert torch.equal(got, want)


def test_default_scale_is_one_over_root_dim():
    module, q, k, v = _qkv(4, 2)
    want, _ = sdpa_attention_forward(module, q, k, v, None)  # SDPA's default scale
    got, _ = gqa_decode_forward(module, q, k, v, None)
    assert torch.allclose(got, want, atol=1e-5)


def test_decode_logits_through_the_model_equal_sdpa(tiny_model):
    """One decode step of a GQA model (4 query, 2 key/value heads) with the new attention gives
    the logits SDPA gives, for left-padded rows."""
    prompts = [[5, 9, 14, 3], [7, 7, 2, 30, 11, 4, 8], [21]]
    batch = make_batch(prompts, [2] * 3, pad_id=0, device="cpu")
    tokens = torch.tensor([17, 23, 29])
    slots = torch.arange(batch.prompt_width, batch.prompt_width + 2)
    logits = {}
    for switched in (False, True):
        cache = DynamicCache(config=tiny_model.config)
        with torch.inference_mode():
            _prefill(tiny_model, batch, cache)
            if switched:
                with decode_attention(tiny_model):
                    assert {c._attn_implementation for c in _configs(tiny_model)} == {NAME}
                    logits[switched] = _decode_step(tiny_model, batch, cache, tokens, 0, slots)
            else:
                logits[switched] = _decode_step(tiny_model, batch, cache, tokens, 0, slots)
    assert tiny_model.config._attn_implementation == "sdpa"  # switched back
    assert torch.allclose(logits[True], logits[False], atol=1e-5)


def test_a_model_on_another_attention_is_left_alone(tiny_model):
    saved = tiny_model.config._attn_implementation
    tiny_model.config._attn_implementation = "eager"
    try:
        with decode_attention(tiny_model):
            assert tiny_model.config._attn_implementation == "eager"
    finally:
        tiny_model.config._attn_implementation = saved
