"""Forced completion lengths for benchmarks on random weights (`--set bench_lengths=MIX`).

A randomly initialised model with a 248k vocabulary almost never samples its EOS token, so
every row of a round would run to the response cap: the worst case, not the published data roots' rounds. A
named mix fixes each row's length instead (EOS ignored, the row stops at its drawn length):

- `arm`: the arm mix of benchmarks/generate_bench.py: lognormal with median 3,000 tokens and
  the spread that puts 10% of rows above the cap, clipped to the cap (so ~10% at the cap) and
  to at least 16 tokens;
- `cap`: every row at the cap (the worst case for memory and time).

Each row's length is drawn from (the run's seed, the call's sampling seed, the row's index in
the call), so a rerun forces the same lengths and a backend need not know how the round dealt
its rows. `off` (the default) forces nothing. The run row records the mix (`overrides`), and
every figure made with one names it.
"""
from __future__ import annotations

import math

MIXES = ("off", "arm", "cap")
ARM_MEDIAN = 3000
ARM_SHARE_AT_CAP = 0.10
Z_90 = 1.2816  # the standard normal's 90th percentile
MIN_LENGTH = 16


def check_mix(mix: str) -> str:
    from warehouse.errors import TerminalError

    if mix not in MIXES:
        raise TerminalError(f"--set bench_lengths={mix}: use {', '.join(MIXES)}")
    return mix


def arm_sigma(cap: int) -> float:
    """The lognormal's sigma that puts `ARM_SHARE_AT_CAP` of rows above `cap`."""
    return math.log(cap / ARM_MEDIAN) / Z_90 if cap > ARM_MEDIAN else 1.0


def draw_lengths(mix: str, cap: int, count: int, seed: int = 0) -> list[int]:
    """`count` forced lengths of `mix` under `cap` (tokens), drawn from `seed`."""
    import numpy as np

    check_mix(mix)
    if mix == "off" or count <= 0:
        return []
    if mix == "cap":
        return [int(cap)] * count
    rng = np.random.default_rng(seed)
    lengths = rng.lognormal(math.log(ARM_MEDIAN), arm_sigma(cap), count)
    return np.clip(lengths, min(MIN_LENGTH, cap), cap).astype(int).tolist()


def forced_lengths(mix: str, budgets: list[int], seed: int) -> list[int]:
    """One forced length per row: row k's drawn under its own budget (the response cap, less
    where the total cap leaves less after its prompt), from `seed` and k."""
    import numpy as np

    out = []
    for k, budget in enumerate(budgets):
        row_seed = int(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, k]).generate_state(1)[0])
        out.append(draw_lengths(mix, budget, 1, row_seed)[0])
    return out


def mix_summary(lengths: list[int], cap: int) -> dict:
    """What a figure says of its mix: rows, tokens, median, rows at the cap."""
    ordered = sorted(lengths)
    return {"rows": len(lengths), "tokens": int(sum(lengths)),
            "median": int(ordered[len(ordered) // 2]) if ordered else 0,
            "at_cap": sum(1 for n in lengths if n >= cap)}
