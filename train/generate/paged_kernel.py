"""Paged decode attention on the GPU: a Triton split-K (flash-decoding) kernel over block tables.

One program per (row, key/value head, split of the row's tokens): it loads the query heads that
share the key/value head (grouped-query attention: each K/V tile is read once for the whole
group), walks its split of the row's tokens through the block table 64 tokens a tile, and keeps
an online softmax in fp32. A second, small step merges the splits by their log-sum-exp. The
pool is read in place: no gathered copy of the cache, no mask tensor, no fp32 score matrix in
memory. Splits keep the GPU busy when few rows are left (the long tail of a round); each row's
own length is cut into them, so a graph captured for a wider table than the rows fill still
keeps every split at work.
"""
from __future__ import annotations

import functools


@functools.cache
def available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def supports(head_dim: int) -> bool:
    """The kernel's shapes: tl.dot needs an inner size of at least 16, tl.arange a power of two
    (real models' 64 or 128; the tests' tiny models have 8 and decode through the gather)."""
    return head_dim >= 16 and head_dim & (head_dim - 1) == 0


@functools.cache
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def paged_decode_kernel(Q, K, V, Tables, Lengths, Out, Max, Sum,
                            stride_qn, stride_qh, stride_kb, stride_kt, stride_kh, stride_tn,
                            stride_on, stride_oh, stride_os, stride_og,
                            stride_mn, stride_mh, stride_ms,
                            scale, width_split,
                            G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                            TILE: tl.constexpr, ROW_SPLIT: tl.constexpr):
        n = tl.program_id(0)
        h = tl.program_id(1)
        s = tl.program_id(2)
        length = tl.load(Lengths + n).to(tl.int32)  # 32-bit token arithmetic (64-bit // and % are slow)
        if ROW_SPLIT:  # each row's own tokens are cut into the grid's splits (whole tiles): every
            # split works however far the table width (a decode graph's power-of-two bucket) exceeds the row
            per_split = tl.cdiv(tl.cdiv(length, tl.num_programs(2)), TILE) * TILE
        else:  # the table width is cut: a short row leaves its last splits empty
            per_split = width_split
        start = s * per_split
        end = tl.minimum(start + per_split, length)
        g = tl.arange(0, GP)
        d = tl.arange(0, D)
        q = tl.load(Q + n * stride_qn + (h * G + g)[:, None] * stride_qh + d[None, :],
                    mask=(g < G)[:, None], other=0.0)
        m_i = tl.full([GP], float("-inf"), tl.float32)
        l_i = tl.zeros([GP], tl.float32)
        acc = tl.zeros([GP, D], tl.float32)
        for t0 in range(start, end, TILE):
            t = t0 + tl.arange(0, TILE)
            valid = t < end
            block = tl.load(Tables + n * stride_tn + t // BS, mask=valid, other=0)
            slot = block.to(tl.int64) * stride_kb + (t % BS) * stride_kt + h * stride_kh
            k = tl.load(K + slot[:, None] + d[None, :], mask=valid[:, None], other=0.0)
            qk = tl.dot(q, tl.trans(k)) * scale  # (GP, TILE) fp32
            qk = tl.where(valid[None, :], qk, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(qk - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(V + slot[:, None] + d[None, :], mask=valid[:, None], other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        real = g < G  # the padded query rows are not stored: the merge reads only the group's
        tl.store(Out + n * stride_on + h * stride_oh + s * stride_os + g[:, None] * stride_og + d[None, :], acc,
                 mask=real[:, None])
        tl.store(Max + n * stride_mn + h * stride_mh + s * stride_ms + g, m_i, mask=real)
        tl.store(Sum + n * stride_mn + h * stride_mh + s * stride_ms + g, l_i, mask=real)

    return paged_decode_kernel


TILE = 64
TARGET_PROGRAMS = 528  # 4 per SM of an H200: enough splits to fill it when few rows are left
WARPS, STAGES = 4, 2
# What a split covers: "row" (a row's own length / splits) or "width" (the table's width).
# End to end on the arm mix at cap 32,768 (1.7B, one H200), "row" ran the long tail's 7 rows at 88
# decode steps/s against 68 and the whole mix in 415.6 s against 466.8 (0.534 of the bound against
# 0.475; two calls on two machines of the same kind: benchmarks/RESULTS.md). Alone on paged_kernel_bench's scenarios, where the table width is
# the bucket of the longest row, "width" is 1.05x faster summed (same run): fewer, longer programs.
SPLIT = "row"
LAYOUT = "nhd"  # what the pool of train.generate.paged holds (the benchmark's baseline)


def paged_decode(query, pool_k, pool_v, tables, lengths, max_length: int, block_size: int, scale: float,
                 target: int | None = None, tile: int | None = None, warps: int | None = None,
                 stages: int | None = None, split: str | None = None):
    """query (N, Hq, D); pools (slots, Hkv, D) or (blocks, Hkv, block_size, D); tables (N, M) block
    ids; lengths (N,) -> (N, Hq, D).
    `target` (programs to aim for), `tile`, `warps`, `stages` and `split` default to the module's
    settings (benchmarks/paged_kernel_bench.py measures the alternatives)."""
    import torch

    target, tile = target or TARGET_PROGRAMS, tile or TILE
    n, heads, dim = query.shape
    kv_heads = pool_k.shape[1]
    if pool_k.dim() == 3:  # token-major: slot = block * block_size + offset, then heads
        stride_kb, stride_kt, stride_kh = block_size * pool_k.stride(0), pool_k.stride(0), pool_k.stride(1)
    else:  # head-major blocks: each (block, head) holds its block_size tokens contiguously
        stride_kb, stride_kh, stride_kt = pool_k.stride(0), pool_k.stride(1), pool_k.stride(2)
    group = heads // kv_heads
    padded = max(16, 1 << (group - 1).bit_length())
    splits = max(1, min(-(-target // (n * kv_heads)), -(-max_length // (4 * tile))))
    row_split, width_split = (split or SPLIT) == "row", 0
    if not row_split:  # whole tiles of the width; the last split may be dropped
        width_split = -(-(-(-max_length // splits)) // tile) * tile
        splits = -(-max_length // width_split)
    out = torch.empty((n, kv_heads, splits, group, dim), device=query.device, dtype=torch.float32)
    mx = torch.empty((n, kv_heads, splits, group), device=query.device, dtype=torch.float32)
    sm = torch.empty_like(mx)
    query, tables = query.contiguous(), tables.contiguous()
    _kernel()[(n, kv_heads, splits)](
        query, pool_k, pool_v, tables, lengths, out, mx, sm,
        query.stride(0), query.stride(1), stride_kb, stride_kt, stride_kh, tables.stride(0),
        out.stride(0), out.stride(1), out.stride(2), out.stride(3),
        mx.stride(0), mx.stride(1), mx.stride(2),
        scale, width_split, G=group, GP=padded, D=dim, BS=block_size, TILE=tile, ROW_SPLIT=row_split,
        num_warps=warps or WARPS, num_stages=stages or STAGES)
    top = mx.max(2, keepdim=True).values  # (n, Hkv, 1, G)
    weight = torch.exp(mx - top)  # (n, Hkv, S, G): empty splits weigh 0
    merged = (weight[..., None] * out).sum(2) / (weight * sm).sum(2)[..., None]  # (n, Hkv, G, D)
    return merged.reshape(n, heads, dim).to(query.dtype)
