"""The plain decode loop's padded prefill (the reference the paged generator is tested against)."""
from __future__ import annotations

import torch
from transformers import DynamicCache

from train.generate.sampler import _prefill, make_batch

# different lengths (left padding) and a repeated prompt
PROMPTS = [[5, 9, 14, 3], [7, 7, 2, 30, 11, 4, 8], [5, 9, 14, 3], [21], [12, 13, 14, 15, 16, 17, 18]]


def test_padded_prefill_logits_are_a_plain_forward_of_each_prompt(tiny_model):
    batch = make_batch(PROMPTS, [2] * len(PROMPTS), pad_id=0, device="cpu")
    with torch.inference_mode():
        got = _prefill(tiny_model, batch, DynamicCache(config=tiny_model.config))
        alone = torch.stack([tiny_model(input_ids=torch.tensor([p])).logits[0, -1] for p in PROMPTS])
    assert torch.allclose(got, alone, atol=1e-5)
