"""The extraction contract: from a completion to the code, its plan and its declared resources.

- The first *complete* fenced python block (```python, ```py or ```python3 ... ```) is the
  code; the text before it is the plan. No fence, or a fence never closed (the completion hit
  the response cap mid-code), gives status ``no_code`` and empty code.
- A PEP 723 ``# /// script`` block inside the code may carry ``[tool.resources]`` with
  ``cpu``, ``mem`` (GiB), ``ephemeral`` (GiB) and ``gpu``. It parses into ``resources``;
  a block that is unclosed, duplicated or not TOML, or a value out of range, sets
  ``decl_malformed`` and ``decl_miss_reason`` and leaves ``resources`` null. The two reasons
  the seeds record are reproduced verbatim; ``gpu`` must be in 1..MAX_GPU (the GPU gate).
- ``dependencies`` in the block are not installed: a non-empty list sets ``decl_deps_ignored``.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass

MAX_GPU = 1
RANGES = {"cpu": (1, 64), "mem": (1, 512), "ephemeral": (1, 1024), "gpu": (1, MAX_GPU)}
MALFORMED_BLOCK = "malformed # /// script block (unclosed or duplicated)"
MALFORMED_TOML = "malformed # /// script block (invalid TOML)"

_FENCE_OPEN = re.compile(r"^[ \t]*```[ \t]*(python3?|py)[ \t]*$", re.MULTILINE | re.IGNORECASE)
_FENCE_CLOSE = re.compile(r"^[ \t]*```[ \t]*$", re.MULTILINE)
_SCRIPT_OPEN = re.compile(r"^# /// script[ \t]*$", re.MULTILINE)
_BLOCK_END = re.compile(r"^# ///[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Extraction:
    """What the contract takes from one completion."""

    code: str
    plan: str
    has_code: bool
    resources: dict | None = None
    decl_malformed: bool = False
    decl_miss_reason: str | None = None
    decl_deps_ignored: bool = False


def extract(completion: str) -> Extraction:
    """Apply the extraction contract to a raw completion."""
    code, plan = _first_complete_block(completion)
    if code is None:
        return Extraction(code="", plan=completion.strip(), has_code=False)
    return Extraction(code=code, plan=plan, has_code=True, **parse_declaration(code))


def _first_complete_block(text: str) -> tuple[str | None, str]:
    opening = _FENCE_OPEN.search(text)
    if opening is None:
        return None, ""
    body_start = opening.end() + 1
    closing = _FENCE_CLOSE.search(text, body_start)
    if closing is None:
        return None, ""
    return text[body_start:closing.start()], text[:opening.start()].strip()


def parse_declaration(code: str) -> dict:
    """resources / decl_malformed / decl_miss_reason / decl_deps_ignored for one script."""
    opens = list(_SCRIPT_OPEN.finditer(code))
    if not opens:
        return {}
    body = _block_body(code, opens[0].end())
    if len(opens) > 1 or body is None:
        return _malformed(MALFORMED_BLOCK)
    try:
        meta = tomllib.loads(body)
    except tomllib.TOMLDecodeError:
        return _malformed(MALFORMED_TOML)
    deps_ignored = bool(meta.get("dependencies"))
    declared = meta.get("tool", {}).get("resources")
    if not isinstance(declared, dict):
        return {"decl_deps_ignored": deps_ignored}
    reason = _out_of_range(declared)
    if reason:
        return {**_malformed(reason), "decl_deps_ignored": deps_ignored}
    resources = {key: declared.get(key) for key in RANGES}
    return {"resources": resources, "decl_deps_ignored": deps_ignored}


def _block_body(code: str, start: int) -> str | None:
    """The TOML between ``# /// script`` and ``# ///``, comment marks removed; None if unclosed."""
    lines = []
    for line in code[start:].splitlines()[1:]:
        if _BLOCK_END.fullmatch(line):
            return "\n".join(lines)
        if not (line == "#" or line.startswith("# ")):
            return None  # PEP 723: every line of the block is a comment
        lines.append(line[2:])
    return None


def _out_of_range(declared: dict) -> str | None:
    for key, (low, high) in RANGES.items():
        value = declared.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            return f"{key}={value} out of range {low}..{high}"
    return None


def _malformed(reason: str) -> dict:
    return {"resources": None, "decl_malformed": True, "decl_miss_reason": reason}
