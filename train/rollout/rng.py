"""Seeded randomness for the tree search, one generator per (run seed, round, task, expansion).

The published data roots' harness shared one `random.Random(0)` that every round re-created, so every round
replayed the same draws and a fresh draft could never be chosen after round 1. Here each
expansion's generator is derived from its own coordinates with a stable hash (blake2b of the
tuple's repr; Python's `hash()` is salted per process), so two expansions never share a
stream and a run is reproducible from its seed.
"""
from __future__ import annotations

import hashlib
import random


def stable_seed(*parts) -> int:
    """A 64-bit integer that depends only on `parts` (stable across processes and machines)."""
    digest = hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def expansion_rng(run_seed: int, round: int, task: str, expansion: int) -> random.Random:
    """The generator of one expansion: parent choice and node ids."""
    return random.Random(stable_seed("expansion", run_seed, round, task, expansion))


def generation_seed(run_seed: int, round: int, expansion: int) -> int:
    """The sampling seed of one batched generation call (all tasks of one expansion index)."""
    return stable_seed("generate", run_seed, round, expansion) % (2**63 - 1)
