"""Chat-template helpers shared by pre-training, generation and the learner."""
from __future__ import annotations

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def prompt_token_ids(tokenizer, messages: list[dict]) -> list[int]:
    """The token ids of `messages` rendered by the tokenizer's chat template, ready to generate."""
    encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded
    return list(ids[0] if ids and isinstance(ids[0], list) else ids)


def split_thinking(text: str) -> tuple[str | None, str]:
    """(thinking, answer): the template's <think>...</think> part, when the completion has one."""
    if THINK_CLOSE not in text:
        return None, text
    thinking, _, answer = text.partition(THINK_CLOSE)
    return thinking.replace(THINK_OPEN, "", 1).strip(), answer.lstrip()
