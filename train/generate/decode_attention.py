"""Decode attention for grouped-query models: each key/value head read once, never copied.

A decode step has one query token per row. transformers' SDPA path, given an explicit mask
(the static cache always has one), repeats every key/value head for the query heads that share
it (`repeat_kv`: with 16 query and 8 key/value heads, a copy of the whole cache at twice its
size, written and then read again) and runs a masked kernel over it. At batch 64 with a
2,048-slot cache that is about 5x the cache's bytes moved per step, and the step's time grows
by about 8.7 us per cache slot (benchmarks/RESULTS.md, Generation run 2).

Here the query heads of one group become the rows of one small matrix product against their
shared key/value head: q (B, Hkv, G, D) @ k^T (B, Hkv, D, S) -> scores (B, Hkv, G, S), softmax
in fp32 with the mask, @ v (B, Hkv, S, D). K and V are each read once per step. Prompts
(more than one query token) go to transformers' own SDPA function unchanged.

Registered with transformers' AttentionInterface (and its mask interface, so masks are built
as for SDPA) under `gqa_decode`; `decode_attention(model)` switches a model to it for the
duration of a decode and back.
"""
from __future__ import annotations

import contextlib

NAME = "gqa_decode"
KERNELS = ("matmul", "sdpa")
_registered = False
_kernel = "matmul"


def set_decode_kernel(kernel: str) -> None:
    """`matmul` (two batched products, fp32 softmax; the default) or `sdpa` (the grouped
    queries through SDPA with the mask): both read each key/value head once."""
    global _kernel
    if kernel not in KERNELS:
        raise ValueError(f"decode kernel {kernel!r}: expected one of {', '.join(KERNELS)}")
    _kernel = kernel


def gqa_decode_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """query (B, Hq, Q, D), key/value (B, Hkv, S, D) -> ((B, Q, Hq, D), None)."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if query.shape[2] != 1 or kwargs.get("softcap") is not None or kwargs.get("position_bias") is not None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    batch, heads, _, dim = query.shape
    kv_heads = key.shape[1]
    scale = scaling if scaling is not None else dim ** -0.5
    q = query.reshape(batch, kv_heads, heads // kv_heads, dim)  # (B, Hkv, G, D): group g of head h
    if _kernel == "sdpa":  # the same grouping through SDPA's masked (memory-efficient) kernel
        mask = attention_mask[..., : key.shape[2]] if attention_mask is not None else None
        out = torch.nn.functional.scaled_dot_product_attention(q, key, value, attn_mask=mask, scale=scale)
        return out.reshape(batch, 1, heads, value.shape[-1]), None
    scores = torch.matmul(q, key.transpose(-1, -2)).float() * scale  # (B, Hkv, G, S)
    if attention_mask is not None:  # (B, 1, 1, S): bool (True = attend) or additive float
        mask = attention_mask[..., : key.shape[2]]
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(probs, value)  # (B, Hkv, G, D)
    return out.reshape(batch, 1, heads, value.shape[-1]), None


def register() -> None:
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, gqa_decode_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    _registered = True


def _configs(model) -> list:
    """Every distinct config with an attention implementation under `model` (text and vision)."""
    seen, out = set(), []
    for module in model.modules():
        config = getattr(module, "config", None)
        if config is not None and id(config) not in seen and hasattr(config, "_attn_implementation"):
            seen.add(id(config))
            out.append(config)
    return out


@contextlib.contextmanager
def use_attention(model, name: str):
    """Every config of `model` on the attention implementation `name` for the duration."""
    configs = _configs(model)
    saved = [c._attn_implementation for c in configs]
    try:
        for c in configs:
            c._attn_implementation = name
        yield
    finally:
        for c, impl in zip(configs, saved):
            c._attn_implementation = impl


@contextlib.contextmanager
def decode_attention(model):
    """`model` decodes with :func:`gqa_decode_forward` for the duration. Only a model on SDPA
    attention is switched; any other implementation (eager for a model that needs it,
    flash-attention, ...) is left as it is."""
    register()
    current = {c._attn_implementation for c in _configs(model)}
    if not current or not current <= {"sdpa", NAME}:
        yield
        return
    with use_attention(model, NAME):
        yield
