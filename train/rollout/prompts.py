"""The chat prompts of the three expansion modes: draft, improve, debug.

One system prompt (hard requirements plus the extraction contract's rule) and one user
message per mode. Improve and debug carry the parent's code and result; debug also carries
the tail of the parent's terminal output. The tiny policy is pre-trained on exactly these
prompts (:mod:`train.tiny.policy`), so changing them changes what it has learned.
"""
from __future__ import annotations

from warehouse.vocabulary import DEBUG, DRAFT, IMPROVE, OK

SYSTEM_PROMPT = """You are an expert machine-learning engineer competing in a Kaggle-style competition.
Hard requirements:
- Read the data from ./input/ and write ./submission/submission.csv with exactly the columns and ids of ./input/sample_submission.csv.
- There is no network access and no GPU; use pandas, numpy and scikit-learn only.
- The script must finish within the time limit; keep it simple.
Answer with a one-line plan, then the whole script in ONE fenced ```python block.
Only the first complete ```python block is run; a block that is never closed counts as no code."""

TERM_TAIL_CHARS = 1500


def draft_messages(description: str) -> list[dict]:
    """Messages asking for a first solution from scratch."""
    user = f"# Task\n{description.strip()}\n\nWrite a first solution."
    return _chat(user)


def improve_messages(description: str, parent: dict) -> list[dict]:
    """Messages asking to improve a valid parent; its code and score are shown."""
    user = (f"# Task\n{description.strip()}\n\n# Previous solution\n```python\n{parent['code'].strip()}\n```\n\n"
            f"# Its result\n{result_line(parent)}\n\nImprove the solution to get a better score.")
    return _chat(user)


def debug_messages(description: str, parent: dict) -> list[dict]:
    """Messages asking to repair a failed parent; its code, status and terminal tail are shown."""
    tail = (parent.get("term_tail") or "")[-TERM_TAIL_CHARS:].strip()
    user = (f"# Task\n{description.strip()}\n\n# Previous solution\n```python\n{parent['code'].strip()}\n```\n\n"
            f"# It failed\n{result_line(parent)}\n```\n{tail}\n```\n\nFix the bug and write the whole corrected script.")
    return _chat(user)


def messages_for(mode: str, description: str, parent: dict | None) -> list[dict]:
    """The prompt of one expansion in `mode` (draft | improve | debug)."""
    if mode == DRAFT:
        return draft_messages(description)
    builder = {IMPROVE: improve_messages, DEBUG: debug_messages}[mode]
    return builder(description, parent)


def result_line(node: dict) -> str:
    """One line saying how a node ended: its status, exception and metric."""
    if node.get("status") == OK:
        return f"status: ok, valid submission, test metric = {node.get('test_metric'):.5g}"
    exc = node.get("exc_type")
    return f"status: {node.get('status')}" + (f" ({exc})" if exc else "")


def _chat(user: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
