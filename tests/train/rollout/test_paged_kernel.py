"""The Triton paged-decode kernel against the torch gather path, in Triton's interpreter on CPU
(skipped where triton is not installed; the GPU benchmark checks it on the device too)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import torch
from train.generate.paged import BlockPool, Step, _decode_rows
from train.generate.paged_kernel import paged_decode

torch.manual_seed(0)
class Config:
    num_key_value_heads, num_attention_heads, head_dim, hidden_size, num_hidden_layers = 2, 8, 32, 256, 1
pool = BlockPool(Config, num_blocks=60, block_size=16, device="cpu", dtype=torch.float32)
pool.keys[0].normal_(); pool.values[0].normal_()
lengths = torch.tensor([1, 17, 300, 700])  # one token, a block boundary, several splits
tables = torch.stack([torch.randperm(60)[:44] for _ in lengths])
query = torch.randn(len(lengths), 8, 1, 32)
step = Step(pool, None, prefill=False, tables=tables, lengths=lengths, max_length=700)
want = _decode_rows(query, pool.keys[0], pool.values[0], step, slice(0, len(lengths)), 32 ** -0.5)
got = paged_decode(query[:, :, 0], pool.keys[0], pool.values[0], tables, lengths, 700, 16, 32 ** -0.5)
err = (got - want).abs().max().item()
assert err < 1e-4, err
blocks = [p.view(60, 16, 2, 32).transpose(1, 2).contiguous() for p in (pool.keys[0], pool.values[0])]  # head-major
got = paged_decode(query[:, :, 0], *blocks, tables, lengths, 700, 16, 32 ** -0.5)
err = max(err, (got - want).abs().max().item())
assert err < 1e-4, err
# a table far wider than the rows (a decode graph's bucket): every row is cut into the 16 splits
for split in ("row", "width"):
    got = paged_decode(query[:, :, 0], pool.keys[0], pool.values[0], tables, lengths, 4096, 16, 32 ** -0.5,
                       split=split)
    err = max(err, (got - want).abs().max().item())
    assert err < 1e-4, (split, err)
print("ok", err)
"""


def test_triton_paged_decode_matches_the_gather_path():
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok")
