"""Attention for one preference pair packed as [shared prompt | chosen answer | rejected answer].

Chosen and rejected conversations share their prompt, and under causal attention the prompt's
states are the same in both; so the prompt is computed ONCE and each answer attends to it and
to itself (never to the other answer). Per pair that is P + A_c + A_r tokens instead of TRL's
2 * (P + max(A_c, A_r)), and every part goes through SDPA without a [T, T] mask: the prompt with
`is_causal`, each answer over [prompt; answer] causal aligned at the end (the answer's first
token sees the whole prompt; flash attention called directly on the GPU, see
:func:`_end_aligned_causal`). With no shared prefix it is plain per-sequence packing.
Gradients are those of two separate forwards (the prompt gets both answers' gradients).

Several pairs may share the row, one after another (`--set pack_tokens=N`); each attends only
within itself. The boundaries [0, P, P + A_c, P + A_c + A_r, then the same for each further
pair from where the last ended] travel as transformers' `cu_seq_lens_q` keyword
(passed down to the attention function, also on the gradient-checkpointing recompute), as in
the GRPO learner's packed attention (train/learn/packed_attention.py).
"""
from __future__ import annotations

import contextlib

NAME = "rm_pair_sdpa"
KERNELS = ("flash", "sdpa")  # flash: flash attention called directly where it runs; sdpa: torch's dispatcher
_registered = False
_kernel = "flash"


def pair_sdpa_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """query (1, Hq, T, D), key/value (1, Hkv, T, D) -> ((1, T, Hq, D), None)."""
    import torch
    from train.learn.packed_attention import repeat_kv

    groups = query.shape[1] // key.shape[1]
    drop = dropout if module.training else 0.0
    flash = _kernel == "flash" and _flash_usable(query, key, value, drop)
    if not flash:  # flash takes the kv heads as they are (grouped-query natively)
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)  # (1, Hq, T, D)
    bounds = [int(x) for x in kwargs["cu_seq_lens_q"]]
    out = query.new_empty(query.shape[0], query.shape[2], query.shape[1], value.shape[-1])  # (1, T, Hq, D)
    for start, p, mid, end in zip(bounds[0:-1:3], bounds[1::3], bounds[2::3], bounds[3::3]):  # one pair each
        if p > start:
            out[:, start:p] = _end_aligned_causal(query[:, :, start:p], key[:, :, start:p], value[:, :, start:p],
                                                  scaling, drop, flash).transpose(1, 2)
        for lo, hi in ((p, mid), (mid, end)):
            k = torch.cat([key[:, :, start:p], key[:, :, lo:hi]], dim=2)  # (1, H, P + A, D)
            v = torch.cat([value[:, :, start:p], value[:, :, lo:hi]], dim=2)
            out[:, lo:hi] = _end_aligned_causal(query[:, :, lo:hi], k, v, scaling, drop, flash).transpose(1, 2)
    return out, None


def _flash_usable(query, key, value, dropout: float) -> bool:
    """Flash attention runs these tensors on this device (CUDA, bf16/fp16, head dim a multiple
    of 8; grouped-query heads as they are). Asked as torch's own `causal_lower_right` bias asks
    it: without the causal flag, which torch's check refuses for fewer queries than keys although
    flash's kernel aligns that case at the end, as wanted here."""
    if not query.is_cuda or query.size(-1) % 8:
        return False
    from torch.backends.cuda import SDPAParams, can_use_flash_attention

    gqa = query.shape[1] != key.shape[1]
    return bool(can_use_flash_attention(SDPAParams(query, key, value, None, dropout, False, gqa)))


def _end_aligned_causal(query, key, value, scale, dropout: float, flash: bool):
    """Causal attention of L queries over S >= L keys aligned at the END (query i sees keys up
    to S - L + i: the answer sees the whole prompt; plain causal when L == S).

    With `flash`, flash attention's own kernel, called directly: its causal flag is end-aligned,
    and a direct call keeps SDPA's dispatcher from choosing cuDNN attention, which builds an
    execution plan for every new sequence length; a pair's lengths are nearly all new (on the
    H200, 12 unseen pairs took 24.1 s through the dispatcher against 8.6 s for 12 others through
    flash, benchmarks/rm_levers.py in benchmarks/RESULTS.md). Also the reason this is not
    torch's `causal_lower_right` bias: a tensor subclass, which selective checkpointing's
    dispatch mode refuses to create. Elsewhere, SDPA with an explicit boolean mask."""
    import torch
    import torch.nn.functional as F

    if flash:
        return torch.ops.aten._scaled_dot_product_flash_attention(
            query, key, value, dropout, is_causal=True, return_debug_mask=False,
            scale=scale if scale is not None else query.size(-1) ** -0.5)[0]
    length, keys = query.shape[2], key.shape[2]
    if length == keys:
        return F.scaled_dot_product_attention(query, key, value, is_causal=True, scale=scale, dropout_p=dropout)
    mask = torch.ones((length, keys), dtype=torch.bool, device=query.device).tril(diagonal=keys - length)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale, dropout_p=dropout)


@contextlib.contextmanager
def pair_attention(model, kernel: str = "flash"):
    """Every config of `model` on the pair attention for the duration (forward and backward);
    `kernel` one of KERNELS."""
    global _registered, _kernel
    from transformers import AttentionInterface

    from train.generate.decode_attention import use_attention

    if kernel not in KERNELS:
        raise ValueError(f"attention kernel {kernel!r}: one of {', '.join(KERNELS)}")
    if not _registered:
        AttentionInterface.register(NAME, pair_sdpa_forward)
        _registered = True
    saved, _kernel = _kernel, kernel
    try:
        with use_attention(model, NAME):
            yield
    finally:
        _kernel = saved


def shared_prefix(chosen: list[int], rejected: list[int]) -> int:
    """Length of the common token prefix, leaving each side at least its last token."""
    limit, n = min(len(chosen), len(rejected)) - 1, 0
    while n < limit and chosen[n] == rejected[n]:
        n += 1
    return n
