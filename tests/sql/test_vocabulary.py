"""The SQL views spell the vocabulary as warehouse.vocabulary does. SQL cannot import Python, so
this reads the views' literals: the lists invariant_violations tests membership in equal the
vocabulary's (every status, mode, sentinel reward and idle exc type, no more), and every
status, mode, exc type and reward-model phase, split and direction any view compares a column
with is one the vocabulary names."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from warehouse import vocabulary as vocab

SQL = Path(__file__).resolve().parents[2] / "sql"
COLUMN = r'"(?P<col>[a-z_]+)"'
LIST = re.compile(COLUMN + r"\s+(?P<op>NOT\s+IN|IN)\s*\((?P<items>[^)]*)\)", re.I)
SCALAR = re.compile(COLUMN + r"\s*(?P<op>=|<>|IS\s+DISTINCT\s+FROM|IS\s+NOT\s+DISTINCT\s+FROM)\s*"
                             r"(?P<value>'[^']*'|-?\d+(?:\.\d+)?)", re.I)
KNOWN = {"status": vocab.STATUSES, "parent_status": vocab.STATUSES, "mode": vocab.MODES,
         "exc_type": vocab.IDLE_EXC_TYPES + (vocab.INFRASTRUCTURE_EXC_TYPE, vocab.TIMEOUT_EXC_TYPE,
                                             vocab.MEMORY_EXC_TYPE, vocab.MEMORY_LIMIT_ERROR,
                                             vocab.DISK_LIMIT_ERROR, vocab.PROMPT_ERROR_EXC_TYPE),
         # the reward-model views' (rm_evaluations, rm_jobs, rm_budgets)
         "phase": vocab.RM_PHASES, "split": vocab.RM_SPLITS, "direction": vocab.RM_DIRECTIONS}


def _code(path: Path) -> str:
    """The statements without their comments (whose prose quotes values too)."""
    return "\n".join(line.split("--", 1)[0] for line in path.read_text().splitlines())


def _literal(text: str):
    text = text.strip()
    return text[1:-1] if text.startswith("'") else float(text)


def _lists(code: str) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for m in LIST.finditer(code):
        out.setdefault(m["col"], []).append(tuple(_literal(v) for v in m["items"].split(",")))
    return out


def _scalars(code: str) -> dict[str, set]:
    out: dict[str, set] = {}
    for m in SCALAR.finditer(code):
        out.setdefault(m["col"], set()).add(_literal(m["value"]))
    return out


def test_the_invariant_view_tests_membership_in_the_vocabulary_and_nothing_else():
    lists = _lists(_code(SQL / "invariant_violations.sql"))
    assert lists["status"] == [vocab.STATUSES]
    assert lists["mode"] == [vocab.MODES]
    assert lists["reward"] == [vocab.SENTINEL_REWARDS]
    assert lists["exc_type"] and all(items == vocab.IDLE_EXC_TYPES for items in lists["exc_type"])
    scalars = _scalars(_code(SQL / "invariant_violations.sql"))
    assert scalars["reward"] == {vocab.IDLE_REWARD}  # -0.2 exactly for the idle kills
    assert scalars["status"] == {vocab.OK, vocab.NO_CODE}  # check 1 reads ok, check 5 no_code


@pytest.mark.parametrize("path", sorted(SQL.glob("*.sql")), ids=lambda p: p.name)
def test_every_view_compares_with_names_the_vocabulary_has(path):
    code = _code(path)
    found = {col: set(values) for col, values in _scalars(code).items()}
    for col, lists in _lists(code).items():
        found.setdefault(col, set()).update(v for items in lists for v in items)
    for col, known in KNOWN.items():
        assert found.get(col, set()) <= set(known), f"{path.name}: {col} literal(s) {found[col] - set(known)}"


def test_the_reader_sees_the_literals(tmp_path):
    """The parser itself: a view with a misspelt status or a stray sentinel is caught."""
    view = tmp_path / "v.sql"
    view.write_text("SELECT 1 FROM nodes WHERE n.\"status\" = 'okay' -- 'crashed' in a comment\n"
                    "  AND \"reward\" NOT IN (-0.5, -0.3, -1.0)\n")
    assert _scalars(_code(view)) == {"status": {"okay"}}
    assert _lists(_code(view)) == {"reward": [(-0.5, -0.3, -1.0)]}


def test_the_run_states_are_the_vocabularys():
    # the view's derived states are literals in its CASE; the ended ones are what a trainer wrote
    code = _code(SQL / "run_state.sql")
    state = code[code.index("CASE"):code.index('END AS "state"')]
    derived = set(re.findall(r"(?:THEN|ELSE) '([a-z]+)'", state))
    assert derived == {vocab.LOST, vocab.IMPORTED, vocab.RUNNING}
    assert set(vocab.RUN_STATES) == derived | set(vocab.END_STATES)
    from train.run_state import end_of

    assert {end_of(None)[0], end_of(KeyboardInterrupt())[0], end_of(ValueError("x"))[0]} == set(vocab.END_STATES)
