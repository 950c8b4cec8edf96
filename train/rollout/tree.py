"""The search tree of one task, and how an expansion picks what to expand (data roots 000, 002).

An expansion samples `siblings` completions from one prompt; they share a `sibling_group`,
GRPO's contrast unit. The first `initial_drafts` expansions of a task's tree are drafts (there
is nothing to expand yet). Every later expansion is a fresh draft with probability
`draft_prob`, else it expands a parent chosen by a softmax over the rewards of the tree's
nodes (every node with code, from any earlier round of the run): a valid parent is improved,
a failed one debugged. The tree persists across rounds, so parents may come from earlier
rounds of the lineage.

Each expansion draws from its own generator (:func:`train.rollout.rng.expansion_rng`): a
fresh draft stays possible in every round by construction.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from train.rollout.prompts import messages_for
from train.rollout.rng import expansion_rng
from warehouse.tree_rules import expansion_mode


@dataclass(frozen=True)
class SearchSettings:
    siblings: int = 16
    expansions_per_round: int = 1
    initial_drafts: int = 1
    draft_prob: float = 0.25
    softmax_temperature: float = 0.5


@dataclass
class TaskTree:
    """Every node record of one task in the run's lineage, oldest first."""

    task: str
    nodes: list = field(default_factory=list)
    expansions: int = 0

    def candidates(self) -> list[dict]:
        """Nodes that can be expanded: they have code (improve or debug needs it) and a reward."""
        return [n for n in self.nodes if n.get("code") and n.get("reward") is not None]

    def add(self, records: list[dict]) -> None:
        self.nodes.extend(records)
        self.expansions += 1


@dataclass
class Choice:
    """What one expansion expands, and how likely that choice was."""

    parent: dict | None
    probability: float
    candidates: int


@dataclass
class Expansion:
    task: str
    round: int
    index: int  # expansion index within the round (the record's `step`)
    mode: str
    choice: Choice
    sibling_group: str
    messages: list
    rng: random.Random

    @property
    def parent(self) -> dict | None:
        return self.choice.parent


def plan_expansion(tree: TaskTree, description: str, round: int, index: int,
                   settings: SearchSettings, run_seed: int) -> Expansion:
    """Choose draft / improve / debug for the next expansion of `tree` and build its prompt."""
    rng = expansion_rng(run_seed, round, tree.task, index)
    choice = choose_parent(tree, settings, rng)
    mode = expansion_mode(choice.parent)
    return Expansion(task=tree.task, round=round, index=index, mode=mode, choice=choice,
                     sibling_group=new_id(rng), messages=messages_for(mode, description, choice.parent),
                     rng=rng)


def choose_parent(tree: TaskTree, settings: SearchSettings, rng: random.Random) -> Choice:
    """None (a fresh draft) or a node of the tree, by the rule in the module docstring."""
    candidates = tree.candidates()
    if tree.expansions < settings.initial_drafts or not candidates:
        return Choice(None, 1.0, len(candidates))
    if rng.random() < settings.draft_prob:
        return Choice(None, settings.draft_prob, len(candidates))
    weights = softmax([float(n["reward"]) for n in candidates], settings.softmax_temperature)
    pick = rng.choices(range(len(candidates)), weights=weights)[0]
    return Choice(candidates[pick], (1 - settings.draft_prob) * weights[pick], len(candidates))


def softmax(values: list[float], temperature: float) -> list[float]:
    top = max(values)
    exps = [math.exp((v - top) / temperature) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def new_id(rng: random.Random) -> str:
    """A 12-hex node or group id, drawn from the expansion's own generator."""
    return f"{rng.getrandbits(48):012x}"
