"""Attention for one preference pair packed as [shared prompt | chosen answer | rejected answer].

Chosen and rejected conversations share their prompt, and under causal attention the prompt's
states are the same in both; so the prompt is computed ONCE and each answer attends to it and
to itself (never to the other answer). Per pair that is P + A_c + A_r tokens instead of TRL's
2 * (P + max(A_c, A_r)), and every part goes through SDPA without a [T, T] mask: the prompt with
`is_causal`, each answer over [prompt; answer] with a lower-right causal bias (the answer's
first token sees the whole prompt). With no shared prefix it is plain per-sequence packing.
Gradients are those of two separate forwards (the prompt gets both answers' gradients).

The boundaries [0, P, P + A_c, P + A_c + A_r] travel as transformers' `cu_seq_lens_q` keyword
(passed down to the attention function, also on the gradient-checkpointing recompute), as in
the GRPO learner's packed attention (train/learn/attention.py).
"""
from __future__ import annotations

import contextlib

NAME = "rm_pair_sdpa"
_registered = False


def pair_sdpa_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """query (1, Hq, T, D), key/value (1, Hkv, T, D) -> ((1, T, Hq, D), None)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention.bias import causal_lower_right

    from train.learn.attention import _repeat_kv

    groups = query.shape[1] // key.shape[1]
    key, value = _repeat_kv(key, groups), _repeat_kv(value, groups)  # (1, Hq, T, D)
    _, p, mid, end = (int(x) for x in kwargs["cu_seq_lens_q"])
    drop = dropout if module.training else 0.0
    out = query.new_empty(query.shape[0], query.shape[2], query.shape[1], value.shape[-1])  # (1, T, Hq, D)
    if p:
        prompt = F.scaled_dot_product_attention(query[:, :, :p], key[:, :, :p], value[:, :, :p], is_causal=True,
                                                scale=scaling, dropout_p=drop)
        out[:, :p] = prompt.transpose(1, 2)
    for lo, hi in ((p, mid), (mid, end)):
        k = torch.cat([key[:, :, :p], key[:, :, lo:hi]], dim=2)  # (1, Hq, P + A, D)
        v = torch.cat([value[:, :, :p], value[:, :, lo:hi]], dim=2)
        bias = causal_lower_right(hi - lo, p + hi - lo) if p else None
        part = F.scaled_dot_product_attention(query[:, :, lo:hi], k, v, attn_mask=bias, is_causal=not p,
                                              scale=scaling, dropout_p=drop)
        out[:, lo:hi] = part.transpose(1, 2)
    return out, None


@contextlib.contextmanager
def pair_attention(model):
    """Every config of `model` on the pair attention for the duration (forward and backward)."""
    global _registered
    from transformers import AttentionInterface

    from train.generate.attention import use_attention

    if not _registered:
        AttentionInterface.register(NAME, pair_sdpa_forward)
        _registered = True
    with use_attention(model, NAME):
        yield


def shared_prefix(chosen: list[int], rejected: list[int]) -> int:
    """Length of the common token prefix, leaving each side at least its last token."""
    limit, n = min(len(chosen), len(rejected)) - 1, 0
    while n < limit and chosen[n] == rejected[n]:
        n += 1
    return n
