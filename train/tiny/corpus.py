"""The tiny policy's pre-training corpus: varied solution programs for the bundled tasks.

Every example is (prompt messages, response) in exactly the form the tree search uses
(:mod:`train.rollout.prompts`): drafts answer a task from scratch, improves answer a task
plus a valid parent, debugs answer a task plus a parent broken on purpose (with a traceback
like the sandbox's) by a correct script. Solutions are varied by jittering their numeric
hyperparameters, so the policy learns a family of programs rather than a handful of strings.

A share of the draft and improve answers (`habit`) read the data from Kaggle's paths
(`/kaggle/input/...`), which the sandbox does not have: the habit real agents bring from
Kaggle notebooks. Those scripts crash with FileNotFoundError, so the policy starts with a
failure it can unlearn from its own reward: one early choice, made the same way in every
task, which a few GRPO steps can move (the learning benchmark measures how far).
Debug examples show the habit's traceback in the parent and the fixed script as the answer.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

from train.rollout.prompts import messages_for
from warehouse.vocabulary import CRASHED, DEBUG, DRAFT, IMPROVE, MODES, OK

_INT_LITERAL = re.compile(r"(?<![\w.])(\d{2,})(?![\w.])")
_FLOAT_LITERAL = re.compile(r"(?<![\w.])(0\.\d+|\d+\.\d+)(?![\w.])")
_IDENTIFIER = re.compile(r"\b([a-z_][a-z0-9_]{3,})\b")
_INPUT_PATH = re.compile(r"""(["'])input/""")
KAGGLE_INPUT = "/kaggle/input/"


@dataclass(frozen=True)
class Solution:
    task: str
    name: str
    code: str

    @property
    def plan(self) -> str:
        """The docstring's first line, else a generic plan."""
        match = re.match(r'\s*"""(.+?)(?:"""|\n)', self.code)
        return match.group(1).strip() if match else f"A {self.name.replace('_', ' ')} solution."


@dataclass(frozen=True)
class Example:
    task: str
    mode: str
    messages: list
    response: str


def task_solutions(task_dir: Path) -> list[Solution]:
    """The reference solution and every script under solutions/ of one task directory."""
    paths = [task_dir / "reference_solution.py", *sorted((task_dir / "solutions").glob("*.py"))]
    return [Solution(task_dir.name, p.stem, p.read_text()) for p in paths if p.is_file()]


def response_text(plan: str, code: str) -> str:
    """A completion in the extraction contract's shape: plan line, one fenced block."""
    return f"{plan}\n\n```python\n{code.strip()}\n```"


def jitter(code: str, rng: random.Random) -> str:
    """The same program with some numeric hyperparameters halved or doubled."""
    def ints(m):
        value = int(m.group(1))
        return str(max(2, int(value * rng.choice((0.5, 1, 1, 2))))) if rng.random() < 0.5 else m.group(1)

    def floats(m):
        value = float(m.group(1))
        return f"{value * rng.choice((0.5, 1, 2)):.3g}" if rng.random() < 0.5 else m.group(1)

    return _FLOAT_LITERAL.sub(floats, _INT_LITERAL.sub(ints, code))


def kaggle_paths(code: str) -> str:
    """The same program reading its data from Kaggle's input directory instead of ./input/."""
    return _INPUT_PATH.sub(lambda m: m.group(1) + KAGGLE_INPUT, code)


def kaggle_traceback(code: str) -> str:
    """The sandbox's traceback tail for the first read of a Kaggle path."""
    lines = code.splitlines()
    at = next((i for i, line in enumerate(lines) if KAGGLE_INPUT in line), 0)
    path = re.search(rf"{KAGGLE_INPUT}[^\"']*", lines[at]) if lines else None
    return (f"Traceback (most recent call last):\n  File \"solution.py\", line {at + 1}, in <module>\n"
            f"    {lines[at].strip() if lines else ''}\nFileNotFoundError: [Errno 2] No such file or "
            f"directory: '{path.group(0) if path else KAGGLE_INPUT}'")


def break_code(code: str, rng: random.Random) -> tuple[str, str, str]:
    """(broken code, exception class, traceback tail): one later use of a name misspelt."""
    lines = code.splitlines()
    names = [n for n in set(_IDENTIFIER.findall(code)) if code.count(n) >= 2 and not n.startswith("__")]
    name = rng.choice(sorted(names)) if names else "pd"
    uses = [i for i, line in enumerate(lines) if re.search(rf"\b{name}\b", line)][1:] or [len(lines) - 1]
    at = rng.choice(uses)
    typo = name[:-2] + name[-1] + name[-2] if len(name) > 2 else name + "x"
    lines[at] = re.sub(rf"\b{name}\b", typo, lines[at], count=1)
    tail = (f"Traceback (most recent call last):\n  File \"solution.py\", line {at + 1}, in <module>\n"
            f"    {lines[at].strip()}\nNameError: name '{typo}' is not defined")
    return "\n".join(lines), "NameError", tail


def build_examples(tasks_root: Path, n: int, seed: int = 0, habit: float = 0.0) -> list[Example]:
    """`n` examples spread over every bundled task and the three modes; a `habit` share of the
    draft and improve answers read Kaggle's paths (see the module's docstring)."""
    rng = random.Random(seed)
    by_task = {d.name: task_solutions(d) for d in sorted(tasks_root.iterdir()) if (d / "grader.toml").is_file()}
    by_task = {task: sols for task, sols in by_task.items() if sols}
    descriptions = {task: (tasks_root / task / "description.md").read_text() for task in by_task}
    return [_example(rng, task, by_task[task], descriptions[task], habit)
            for task in (rng.choice(sorted(by_task)) for _ in range(n))]


def _example(rng: random.Random, task: str, solutions: list[Solution], description: str,
             habit: float = 0.0) -> Example:
    mode = rng.choices(MODES, weights=(2, 1, 1))[0]
    target = rng.choice(solutions)
    code = jitter(target.code, rng)
    if mode != DEBUG and habit and rng.random() < habit:
        code = kaggle_paths(code)
    answer = response_text(target.plan, code)
    parent = _parent(rng, mode, solutions, habit)
    return Example(task, mode, messages_for(mode, description, parent), answer)


def _parent(rng: random.Random, mode: str, solutions: list[Solution], habit: float = 0.0) -> dict | None:
    if mode == DRAFT:
        return None
    code = jitter(rng.choice(solutions).code, rng)
    if mode == IMPROVE:
        return {"code": code, "status": OK, "test_metric": rng.uniform(0.05, 0.95)}
    if habit and rng.random() < 0.5:  # half the debug parents crashed on the habit
        broken = kaggle_paths(code)
        return {"code": broken, "status": CRASHED, "exc_type": "FileNotFoundError",
                "term_tail": kaggle_traceback(broken)}
    broken, exc, tail = break_code(code, rng)
    return {"code": broken, "status": CRASHED, "exc_type": exc, "term_tail": tail}
