"""The expansion-mode and best-node rules are one function each (warehouse.tree_rules), and
the trainer's tree search and the sample warehouse call that function; their outputs here are
checked against the rules written out another way."""
from __future__ import annotations

import random

import pytest

import ingest.sample
import train.rollout.records
import train.rollout.render
import train.rollout.tree
from warehouse import tree_rules
from warehouse.tree_rules import best_node, expansion_mode
from warehouse.vocabulary import STATUSES


@pytest.mark.parametrize("parent, mode", [
    (None, "draft"),
    ({"status": "ok"}, "improve"),
    *(({"status": s}, "debug") for s in STATUSES if s != "ok"),
    ({}, "debug"),  # a parent without a status is not ok
])
def test_the_expansion_mode_follows_the_parent(parent, mode):
    assert expansion_mode(parent) == mode


def _best_by_sorting(records: list[dict]) -> dict | None:
    ranked = sorted((r for r in records if r["status"] == "ok" and r["oriented"] is not None),
                    key=lambda r: r["id"])
    ranked.sort(key=lambda r: r["oriented"], reverse=True)  # stable: the smallest id first among ties
    return ranked[0] if ranked else None


@pytest.mark.parametrize("seed", range(20))
def test_the_best_node_is_the_ok_node_with_the_highest_oriented_then_the_smallest_id(seed):
    rng = random.Random(seed)
    records = [{"id": f"{rng.getrandbits(16):04x}", "status": rng.choice(STATUSES),
                "oriented": rng.choice([None, 0.1, 0.5, 0.9, rng.random()])} for _ in range(rng.randint(0, 12))]
    assert best_node(records) is _best_by_sorting(records)


def test_no_ok_node_means_no_best():
    assert best_node([{"id": "a", "status": "crashed", "oriented": None}]) is None
    assert best_node([{"id": "a", "status": "ok", "oriented": None}]) is None
    assert best_node([]) is None


def test_the_trainer_and_the_sample_warehouse_call_the_same_rules():
    assert train.rollout.tree.expansion_mode is tree_rules.expansion_mode
    assert ingest.sample.expansion_mode is tree_rules.expansion_mode
    for module in (train.rollout.records, train.rollout.render, ingest.sample):
        assert module.best_node is tree_rules.best_node
