"""README.md, docs/*.md and benchmarks/RESULTS.md state results with their date, machine and
command; they do not tell the story of how the work went. The rule is narrow on purpose: it
refuses "session" where it means a working session ("the tenth session", "this session's
device time"), and a few phrases that only narrate ("we tried", "was cut off"). A software
session keeps its word: a database or SQLAlchemy session, `Session`, a path such as
`train/learn/session.py`, or anything inside a code span or a fenced block."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Words that, just before "session", make it a software session rather than a working one.
SOFTWARE = re.compile(
    r"\b(?:database|db|sqlalchemy|orm|duckdb|ray|http|https|browser|login|requests|client|ssh|tmux"
    r"|shell|process|user|web)\s+$", re.IGNORECASE)
# "session" standing as a word of prose: not part of a path or identifier (session.py,
# test_learn_session, /session/, Session()).
SESSION = re.compile(r"(?<![\w/.-])sessions?(?!\w|[/-]|\.\w|\()", re.IGNORECASE)
NARRATION = re.compile(r"\bwe (?:tried|then tried|first tried)\b|\bwas cut off\b", re.IGNORECASE)
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"`[^`]*`")


def history_words(text: str) -> list[tuple[int, str]]:
    """(line number, the words) for each narration of the text's own writing."""
    found, in_fence = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or line.startswith("    "):  # a fenced or indented code block
            continue
        prose = CODE_SPAN.sub("``", line)
        found += [(n, m.group(0)) for m in SESSION.finditer(prose) if not SOFTWARE.search(prose[:m.start()])]
        found += [(n, m.group(0)) for m in NARRATION.finditer(prose)]
    return found


def product_pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "benchmarks" / "RESULTS.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", product_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_page_carries_no_story_of_its_writing(page):
    found = history_words(page.read_text())
    assert found == [], "\n".join(f"{page.relative_to(ROOT)}:{n}: {words!r}" for n, words in found)


@pytest.mark.parametrize("line", [
    "Measured in the tenth session (2026-12-04).",
    "The ninth session had no device time.",
    "Two sessions, two machines: not one run.",
    "what this session's device time bought",
    "Session 3 ran the 8B.",
    "We tried the static path first.",
    "The run was cut off by the call's limit.",
])
def test_narration_is_refused(line):
    assert history_words(line) != []


@pytest.mark.parametrize("line", [
    "Each request opens a database session and closes it.",
    "A SQLAlchemy session wraps the connection.",
    "The learner lives in train/learn/session.py.",
    "The learner lives in `train/learn/session.py` and opens a `Session`.",
    "tests/train/learn/test_learn_session.py covers it.",
    "Ray session logs go under /tmp/ray/session_latest.",
    "```\nsession = Session(engine)\n```",
    "    session = make_session()",
    "The cut-off date is 2026-12-06.",
])
def test_software_sessions_and_code_are_allowed(line):
    assert history_words(line) == []
