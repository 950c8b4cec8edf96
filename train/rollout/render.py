"""The rendered views of a task's round (tree.txt and transcript.md), as the published data roots' harness wrote.

tree.txt: one line per node, `[id] mode status test=... sib_grp=...`, indented under its parent
when the parent is in the same file, then a `nodes=/sibling_groups=` line and the best node.
transcript.md: a header with node/valid counts and the sorted valid scores, then the tree with
each node's plan and result.
"""
from __future__ import annotations

from warehouse.tree_rules import best_node
from warehouse.vocabulary import OK


def _ordered(records: list[dict]) -> list[tuple[int, dict]]:
    """(depth in this file, record) in tree order: children under their parents."""
    by_parent: dict = {}
    ids = {r["id"] for r in records}
    for r in records:
        by_parent.setdefault(r["parent_id"] if r["parent_id"] in ids else None, []).append(r)
    out: list[tuple[int, dict]] = []

    def walk(parent, depth):
        for child in by_parent.get(parent, []):
            out.append((depth, child))
            walk(child["id"], depth + 1)

    walk(None, 0)
    return out


def _test(record: dict) -> str:
    metric = record.get("test_metric")
    return f"{metric:.5g}" if metric is not None else "None"


def render_tree(records: list[dict]) -> str:
    lines = [f"{'  ' * depth}[{r['id']}] {r['mode']} {r['status']} test={_test(r)} sib_grp={r['sibling_group']}"
             for depth, r in _ordered(records)]
    groups = len({r["sibling_group"] for r in records})
    valid = sum(r["status"] == OK for r in records)
    best = best_node(records)
    lines.append(f"nodes={len(records)} sibling_groups={groups} valid={valid} "
                 f"best={best['id'] if best else None}")
    return "\n".join(lines) + "\n"


def render_transcript(task: str, records: list[dict]) -> str:
    valid = sorted((r["oriented"] for r in records if r["status"] == OK and r.get("oriented") is not None),
                   reverse=True)
    best = best_node(records)
    head = [f"# {task}", "", f"nodes: {len(records)}  valid: {len(valid)}  best score: "
            f"{_test(best) if best else None}", f"valid oriented scores: {[round(v, 5) for v in valid]}", "",
            "## Tree", ""]
    body = []
    for depth, r in _ordered(records):
        exc = f" ({r['exc_type']})" if r.get("exc_type") else ""
        body.append(f"{'  ' * depth}|- [{r['id']}] {r['mode']} {r['status']}{exc} test={_test(r)} reward={r['reward']:.3f}")
        if r.get("plan"):
            body.append(f"{'  ' * depth}   plan: {r['plan'].splitlines()[0][:200]}")
    return "\n".join(head + body) + "\n"
