"""The static cache's causal prefill against the padded, masked prefill of the dynamic path."""
from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache, StaticCache

from train.generate.sampler import _prefill, _prefill_causal, make_batch

# different lengths (left padding), a repeated prompt (siblings share one forward)
PROMPTS = [[5, 9, 14, 3], [7, 7, 2, 30, 11, 4, 8], [5, 9, 14, 3], [21], [12, 13, 14, 15, 16, 17, 18]]


@pytest.mark.parametrize("budget", [65536, 7])  # one forward per length / a forward per prompt
def test_causal_prefill_matches_padded_prefill_logits_and_cache(tiny_model, budget):
    batch = make_batch(PROMPTS, [3] * len(PROMPTS), pad_id=0, device="cpu")
    reference, static = DynamicCache(config=tiny_model.config), StaticCache(config=tiny_model.config,
                                                                             max_cache_len=batch.prompt_width + 3)
    with torch.inference_mode():
        expected = _prefill(tiny_model, batch, reference)
        got = _prefill_causal(tiny_model, batch, static, budget=budget)
    assert torch.allclose(got, expected, atol=1e-5)
    for layer in range(tiny_model.config.num_hidden_layers):
        for name in ("keys", "values"):
            want, have = getattr(reference.layers[layer], name), getattr(static.layers[layer], name)
            for row, pad in enumerate(batch.pad_len.tolist()):  # real prompt slots equal, the rest zero
                assert torch.allclose(have[row, :, pad:batch.prompt_width], want[row, :, pad:], atol=1e-5)
                assert not have[row, :, :pad].any() and not have[row, :, batch.prompt_width:].any()


def test_causal_prefill_logits_are_a_plain_forward_of_each_prompt(tiny_model):
    batch = make_batch(PROMPTS, [2] * len(PROMPTS), pad_id=0, device="cpu")
    with torch.inference_mode():
        got = _prefill_causal(tiny_model, batch, StaticCache(config=tiny_model.config, max_cache_len=9))
        alone = torch.stack([tiny_model(input_ids=torch.tensor([p])).logits[0, -1] for p in PROMPTS])
    assert torch.allclose(got, alone, atol=1e-5)
