"""Preference pairs and evaluation rows: JSONL in the UltraFeedback / RewardBench shapes.

A training pair (UltraFeedback binarized) is `{"prompt": str, "chosen": [messages],
"rejected": [messages]}`; `chosen`/`rejected` may also be plain answer strings. An evaluation
row (RewardBench) is `{"id", "prompt": str, "chosen": str, "rejected": str, "subset": str}`,
optionally with `"section"` (Chat, Chat Hard, Safety, Reasoning); without it the section is
RewardBench's for the subset.

A malformed line is reported as `file:line: why` and skipped; the rest of the file loads.
Before training, :func:`check_no_overlap` refuses when any training prompt is also an
evaluation prompt (the seed's audit: zero overlap over all pairs).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from warehouse.errors import TerminalError

SECTIONS = ("Chat", "Chat Hard", "Safety", "Reasoning")

# RewardBench v1's subsets and the section each belongs to (its 2,985 filtered rows).
SUBSET_SECTIONS = {
    **dict.fromkeys(["alpacaeval-easy", "alpacaeval-length", "alpacaeval-hard", "mt-bench-easy",
                     "mt-bench-med"], "Chat"),
    **dict.fromkeys(["mt-bench-hard", "llmbar-natural", "llmbar-adver-neighbor", "llmbar-adver-GPTInst",
                     "llmbar-adver-GPTOut", "llmbar-adver-manual"], "Chat Hard"),
    **dict.fromkeys(["refusals-dangerous", "refusals-offensive", "xstest-should-refuse",
                     "xstest-should-respond", "donotanswer"], "Safety"),
    **dict.fromkeys(["math-prm", "hep-cpp", "hep-go", "hep-java", "hep-js", "hep-python", "hep-rust"],
                    "Reasoning"),
}


class PreferenceDataError(TerminalError):
    """A pair or evaluation file is missing, empty, or overlaps the other."""


@dataclass(frozen=True)
class Pair:
    """One preference pair: two full conversations sharing a prompt."""

    prompt: str
    chosen: tuple  # messages, the last one the assistant's answer
    rejected: tuple
    line: int = 0


@dataclass(frozen=True)
class EvalRow(Pair):
    """One evaluation row: a pair plus where it counts (RewardBench subset and section)."""

    id: str = ""
    subset: str = ""
    section: str = ""


@dataclass
class Loaded:
    """What a file yielded: good rows and one `file:line: why` per skipped line."""

    rows: list
    errors: list[str]


def read_pairs(path: str | Path) -> Loaded:
    """Training pairs from a JSONL file (UltraFeedback shape)."""
    return _read(Path(path), _pair)


def read_eval(path: str | Path) -> Loaded:
    """Evaluation rows from a JSONL file (RewardBench shape)."""
    return _read(Path(path), _eval_row)


def _read(path: Path, parse) -> Loaded:
    if not path.is_file():
        raise PreferenceDataError(f"{path}: no such file")
    rows, errors = [], []
    with open(path, encoding="utf-8") as fh:
        for number, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                rows.append(parse(json.loads(text), number))
            except (ValueError, TypeError, KeyError) as exc:
                errors.append(f"{path}:{number}: {_why(exc)}")
    if not rows:
        raise PreferenceDataError(f"{path}: no usable rows" + (f" ({errors[0]})" if errors else ""))
    return Loaded(rows, errors)


def _why(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg})"
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}"
    return str(exc)


def _pair(obj, line: int) -> Pair:
    if not isinstance(obj, dict):
        raise ValueError("a line must be a JSON object")
    prompt = obj.get("prompt")
    chosen, rejected = _conversation(obj, "chosen", prompt), _conversation(obj, "rejected", prompt)
    if prompt is None:  # implicit prompt: the conversation's first user turn
        prompt = chosen[0]["content"]
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("'prompt' must be a non-empty string")
    return Pair(prompt=prompt, chosen=chosen, rejected=rejected, line=line)


def _conversation(obj: dict, key: str, prompt) -> tuple:
    value = obj[key]
    if isinstance(value, str):
        if not isinstance(prompt, str):
            raise ValueError(f"'{key}' is a string, so 'prompt' must be one too")
        value = [{"role": "user", "content": prompt}, {"role": "assistant", "content": value}]
    if not isinstance(value, list) or len(value) < 2:
        raise ValueError(f"'{key}' must be an answer string or a list of at least two messages")
    for message in value:
        if not (isinstance(message, dict) and isinstance(message.get("role"), str)
                and isinstance(message.get("content"), str)):
            raise ValueError(f"'{key}' has a message without string 'role' and 'content'")
    if value[-1]["role"] != "assistant":
        raise ValueError(f"'{key}' must end with the assistant's answer")
    return tuple(dict(role=m["role"], content=m["content"]) for m in value)


def _eval_row(obj, line: int) -> EvalRow:
    pair = _pair(obj, line)
    subset = str(obj.get("subset") or "")
    section = obj.get("section") or SUBSET_SECTIONS.get(subset)
    if section not in SECTIONS:
        raise ValueError(f"section {section!r} (subset {subset!r}) is not one of {', '.join(SECTIONS)}")
    row_id = str(obj["id"]) if obj.get("id") is not None else f"line-{line}"
    return EvalRow(prompt=pair.prompt, chosen=pair.chosen, rejected=pair.rejected, line=line,
                   id=row_id, subset=subset or section, section=section)


def prompt_key(prompt: str) -> str:
    """A prompt's identity for the overlap check: case- and whitespace-insensitive."""
    return hashlib.sha256(" ".join(prompt.lower().split()).encode()).hexdigest()


def check_no_overlap(pairs: list[Pair], rows: list[EvalRow], pairs_path, eval_path) -> int:
    """Refuse (PreferenceDataError) when a training prompt is also an evaluation prompt;
    returns how many pairs were checked."""
    eval_keys = {prompt_key(r.prompt): r for r in rows}
    hits = [(p, eval_keys[prompt_key(p.prompt)]) for p in pairs if prompt_key(p.prompt) in eval_keys]
    if hits:
        pair, row = hits[0]
        raise PreferenceDataError(
            f"{len(hits)} training pair(s) share their prompt with evaluation rows, e.g. {pairs_path}:{pair.line} "
            f"and {eval_path}:{row.line} (id {row.id}). Remove them from the pairs before training.")
    return len(pairs)


def proxy_rows(rows: list[EvalRow], n: int) -> list[EvalRow]:
    """The fixed proxy subset: the `n` rows whose id hashes lowest (stable under file order)."""
    ranked = sorted(rows, key=lambda r: hashlib.sha256(r.id.encode()).hexdigest())
    return sorted(ranked[:n], key=lambda r: r.line)
