"""Two rules of the tree search, written once for the trainer (train.rollout) and the sample
warehouse (ingest.sample): the mode a new node is expanded in, and the best node of a set
(docs/metrics.md). The records are node dicts as the data roots hold them."""
from __future__ import annotations

from collections.abc import Iterable

from warehouse.vocabulary import DEBUG, DRAFT, IMPROVE, OK


def expansion_mode(parent: dict | None) -> str:
    """draft for a node without a parent (invariant 2), improve from an ok parent, debug from
    a parent that is not ok."""
    if parent is None:
        return DRAFT
    return IMPROVE if parent.get("status") == OK else DEBUG


def best_node(records: Iterable[dict]) -> dict | None:
    """The ok node with the highest `oriented` metric (ties: the smallest id); an ok node
    without one is not ranked. None when no node qualifies."""
    ok = [r for r in records if r["status"] == OK and r.get("oriented") is not None]
    return min(ok, key=lambda r: (-r["oriented"], r["id"])) if ok else None
