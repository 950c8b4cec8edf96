"""Token-budget micro-batches with a hard cap.

Sequences are packed first-fit-decreasing into micro-batches of at most `budget` tokens
each, concatenated without padding (attention stays inside each sequence, see packed_attention.py).
Unlike verl's balancer, no micro-batch ever exceeds the budget: a sequence longer than the
budget is an error that names the fix, never a silent over-size batch.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from warehouse.errors import TerminalError


class BudgetError(TerminalError):
    """A sequence does not fit in one micro-batch."""


@dataclass(frozen=True)
class MicroBatch:
    indices: tuple[int, ...]  # which sequences, in packing order
    lengths: tuple[int, ...]  # their token counts

    @property
    def tokens(self) -> int:
        return sum(self.lengths)


def pack(lengths: Sequence[int], budget: int) -> list[MicroBatch]:
    """Micro-batches covering every sequence once, each of at most `budget` tokens."""
    too_long = [(i, n) for i, n in enumerate(lengths) if n > budget]
    if too_long:
        i, n = too_long[0]
        raise BudgetError(
            f"sequence {i} has {n} tokens, over the micro-batch budget of {budget}; "
            f"raise the token budget to at least {max(n for _, n in too_long)} (it must cover "
            "the arm's total cap)"
        )
    bins: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda j: (-lengths[j], j)):
        slot = next((b for b, free in enumerate(room) if free >= lengths[i]), None)
        if slot is None:
            bins.append([])
            room.append(budget)
            slot = len(bins) - 1
        bins[slot].append(i)
        room[slot] -= lengths[i]
    return [MicroBatch(tuple(b), tuple(lengths[i] for i in b)) for b in bins]
