"""Attention over packed sequences without padding and without a [T, T] mask.

A micro-batch is one row of concatenated sequences. Each sequence attends causally to
itself only; we run scaled_dot_product_attention with `is_causal=True` per sequence, which
lets PyTorch pick its flash kernel (no materialized mask: a 65536-token mask would be 4 GiB).

The function is registered with transformers' AttentionInterface under `packed_sdpa`; the
sequence boundaries travel as the `cu_seq_lens_q` keyword (transformers passes model kwargs
down to the attention function, also on the gradient-checkpointing recompute). Use
`packed_attention(model)` around forward and backward: generation keeps the model's own
attention implementation.
"""
from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from train.generate.decode_attention import use_attention

NAME = "packed_sdpa"
_registered = False
_native_gqa = True  # let SDPA broadcast key/value heads itself instead of repeating them


def set_native_gqa(enabled: bool) -> None:
    """Use SDPA's enable_gqa (no repeated K/V copies) where the kernel supports it."""
    global _native_gqa
    _native_gqa = enabled


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    # (B, Hkv, T, D) -> (B, Hkv * groups, T, D)
    if groups == 1:
        return x
    b, h, t, d = x.shape
    return x[:, :, None].expand(b, h, groups, t, d).reshape(b, h * groups, t, d)


def packed_sdpa_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                        **kwargs):
    """query (B, Hq, T, D), key/value (B, Hkv, T, D) -> ((B, T, Hq, D), None)."""
    groups = query.shape[1] // key.shape[1]
    extra = {"enable_gqa": True} if _native_gqa and groups > 1 else {}
    if not extra:
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    bounds = kwargs.get("cu_seq_lens_q")
    if bounds is None:
        bounds = [0, query.shape[2]]
    elif isinstance(bounds, torch.Tensor):
        bounds = bounds.tolist()
    drop = dropout if module.training else 0.0
    b_, h_, t_, _ = query.shape
    out = query.new_empty(b_, t_, h_, value.shape[-1])  # (B, T, Hq, D): one copy per part, no cat
    for a, b in zip(bounds[:-1], bounds[1:]):
        part = F.scaled_dot_product_attention(
            query[:, :, a:b], key[:, :, a:b], value[:, :, a:b], is_causal=True, scale=scaling,
            dropout_p=drop, **extra,
        )
        out[:, a:b] = part.transpose(1, 2)
    return out, None


def register() -> None:
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface

    AttentionInterface.register(NAME, packed_sdpa_forward)
    _registered = True


@contextlib.contextmanager
def packed_attention(model):
    """Switch every config of `model` to packed attention for the duration (forward and backward)."""
    register()
    with use_attention(model, NAME):
        yield


def boundaries(lengths) -> torch.Tensor:
    """Cumulative sequence starts (n + 1,), as flash-attention's cu_seqlens."""
    out = [0]
    for n in lengths:
        out.append(out[-1] + int(n))
    return torch.tensor(out, dtype=torch.int32)


def position_ids(lengths, device=None) -> torch.Tensor:
    """(1, T): positions restart at 0 for each packed sequence (RoPE sees each alone)."""
    return torch.cat([torch.arange(int(n), device=device) for n in lengths])[None]
