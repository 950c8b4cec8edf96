"""Node records and task-round summaries in the published data roots' schema C (docs/data-roots.md).

The environment gives the execution and grading fields (:func:`train.env.evaluate`); this
module adds the search fields (id, parent, mode, group, depth, parent evidence) and the
generation fields (prompt, completion, thinking, token ids, logprobs).
"""
from __future__ import annotations

from train.generate.base import Completion
from train.rollout.tree import Expansion, new_id
from warehouse.tree_rules import best_node
from warehouse.vocabulary import CRASHED, INFRASTRUCTURE_REWARD, OK, PROMPT_ERROR_EXC_TYPE

PROMPT_ERROR_REWARD = INFRASTRUCTURE_REWARD  # not the policy's doing: no tokens to learn from


def node_records(expansion: Expansion, completions: list[Completion], env_records: list[dict]) -> list[dict]:
    """One record per sibling; `env_records` line up with `completions`."""
    records = [_record(expansion, c, e) for c, e in zip(completions, env_records)]
    _mark_group_best(records)
    return records


def _record(expansion: Expansion, completion: Completion, env: dict) -> dict:
    parent = expansion.parent
    env = {k: v for k, v in env.items() if k != "humanrank"}  # == reward for ok nodes
    record = {
        "id": new_id(expansion.rng),
        "parent_id": parent["id"] if parent else None,
        "depth": (parent.get("depth") or 0) + 1 if parent else 0,
        "mode": expansion.mode,
        "round": expansion.round,
        "step": expansion.index,
        "sibling_group": expansion.sibling_group,
        "exp_id": expansion.task,
        **env,
        "n_children": 0,
        **_parent_evidence(expansion, env),
        "prompt_messages": completion.prompt_messages,
        "raw_completion": completion.raw_completion,
        "thinking": completion.thinking,
        "response_token_ids": completion.response_token_ids,
        "response_logprobs": completion.response_logprobs,
    }
    return record


def prompt_error_record(completion: Completion) -> dict:
    """The environment-side fields of a node whose prompt could not be generated from."""
    return {"code": "", "plan": "", "status": CRASHED, "exc_type": PROMPT_ERROR_EXC_TYPE, "is_buggy": True,
            "reward": PROMPT_ERROR_REWARD, "test_metric": None, "oriented": None, "source": None,
            "grade_error": None, "medal": None, "exec_time": None, "exec_timings": None,
            "term_tail": completion.error, "returncode": None, "where": None}


def _parent_evidence(expansion: Expansion, env: dict) -> dict:
    """parent_oriented / parent_P (the probability the search chose this parent) / improve_delta."""
    parent = expansion.parent
    if parent is None:
        return {"parent_oriented": None, "parent_P": None, "parent_P_evidence": None, "improve_delta": None}
    before, after = parent.get("oriented"), env.get("oriented")
    return {
        "parent_oriented": before,
        "parent_P": expansion.choice.probability,
        "parent_P_evidence": {"candidates": expansion.choice.candidates, "parent_reward": parent.get("reward"),
                              "parent_status": parent.get("status")},
        "improve_delta": after - before if before is not None and after is not None else None,
    }


def _mark_group_best(records: list[dict]) -> None:
    """group_best: the sibling with the highest reward (the first one on ties)."""
    if not records:
        return
    best = max(range(len(records)), key=lambda i: (records[i]["reward"], -i))
    for i, record in enumerate(records):
        record["group_best"] = i == best


def task_round_summary(task: str, round: int, records: list[dict], *, model: str, expansions: int,
                       buffer_nodes: int, gen_llm_seconds: float, gen_exec_seconds: float,
                       rollout_file: str, workspace: str) -> dict:
    """The harness's per-task round summary (docs/data-roots.md, "Round summaries")."""
    best = best_node(records)
    return {
        "exp_id": task, "round": round, "model": model, "exec_backend": "local", "adapter_path": "",
        "nodes": len(records), "valid": sum(r["status"] == OK for r in records),
        "buffer_nodes": buffer_nodes, "expansions": expansions, "phase": "train",
        "best_test_metric": best["test_metric"] if best else None,
        "best_node_id": best["id"] if best else None, "honest_test_metric": None,
        "rollout_file": rollout_file, "workspace": workspace,
        "gen_llm_seconds": round_s(gen_llm_seconds), "gen_exec_seconds": round_s(gen_exec_seconds),
    }


def round_s(seconds: float) -> float:
    return float(f"{seconds:.3f}")
