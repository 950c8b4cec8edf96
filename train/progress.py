"""`train run`'s live display at a terminal: per round, rows generated and tokens, nodes
executed and their statuses, then the GRPO step's phases, each with an ETA.

The loop reports events (`expansion_generated`, `expansion_executed`, `phase_started`, ...);
:class:`LiveProgress` draws them with rich's Live, above which the loop's one-line round and
step summaries keep printing. Only a terminal gets it: under `--quiet`, or when stdout is not
a TTY (a CI log, a pipe), `make_monitor` returns None and the loop prints its plain lines.

ETAs are estimates from this run's own pace: a round's from its expansions done so far, a
step's from the previous step's phase times (none for the first step).

While the display is drawn, nothing else may write to the terminal, or the frames it redraws
are left behind in the scrollback: from `make_monitor` to `close`, Python warnings (a
library's FutureWarning) and logged warnings (the sandbox's fallback notice) are printed as
one `Warning:` line each, above the display, each text once; stray prints to stdout or stderr
while it is drawn go above it too.

`step_line` is the one line a step prints (with or without the display): the few metrics a
researcher watches, not every key of its step_metrics row.
"""
from __future__ import annotations

import logging
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field

from warehouse.vocabulary import OK


def make_monitor(quiet: bool = False, stream=None):
    """A LiveProgress for an interactive terminal, else None (quiet, CI, pipes)."""
    stream = stream or sys.stdout
    if quiet or not getattr(stream, "isatty", lambda: False)():
        return None
    monitor = LiveProgress(stream)
    monitor.capture_warnings()  # from now on (the model's loading warns before round 1) until close()
    return monitor


class Unwatched:
    """The loop's monitor where nothing is drawn live (a log, a test, a rank other than 0)."""

    def round_started(self, round_no: int, expansions: int, tasks: int) -> None:
        pass

    def step_started(self, step: int) -> None:
        pass

    def round_finished(self) -> None:
        pass


@dataclass
class RoundState:
    round: int
    expansions: int
    started: float = field(default_factory=time.monotonic)
    generated_expansions: int = 0
    executed_expansions: int = 0
    rows: int = 0
    tokens: int = 0
    executed: int = 0
    statuses: Counter = field(default_factory=Counter)

    def eta_s(self, tasks: int) -> float | None:
        """Seconds left: the pace of the task-expansions executed so far, over those left."""
        total = self.expansions * max(tasks, 1)
        if not self.executed_expansions or self.executed_expansions >= total:
            return None
        elapsed = time.monotonic() - self.started
        return elapsed / self.executed_expansions * (total - self.executed_expansions)


@dataclass
class StepState:
    step: int
    started: float = field(default_factory=time.monotonic)
    done: dict = field(default_factory=dict)     # phase -> seconds
    current: str | None = None
    current_started: float = 0.0


class LiveProgress:
    """Draws the round and step under way; `log` prints a line above the display."""

    def __init__(self, stream=None):
        from rich.console import Console

        self.console = Console(file=stream or sys.stdout)
        self.live = None
        self.tasks = 1
        self.round: RoundState | None = None
        self.step: StepState | None = None
        self.last_step_s: dict[str, float] = {}
        self._said: set[str] = set()  # warnings already printed
        self._restore = None

    # --- events from the loop ----------------------------------------------------------------
    def round_started(self, round_no: int, expansions: int, tasks: int) -> None:
        self.tasks = tasks
        self.round, self.step = RoundState(round_no, expansions), None
        self._start()

    def expansion_generated(self, nodes: int, tokens: int) -> None:
        if self.round:
            self.round.generated_expansions += 1
            self.round.rows += nodes
            self.round.tokens += tokens
            self._refresh()

    def expansion_executed(self, executed: int, statuses: list[str]) -> None:
        if self.round:
            self.round.executed_expansions += 1
            self.round.executed += executed
            self.round.statuses.update(s or "NULL" for s in statuses)
            self._refresh()

    def step_started(self, step: int) -> None:
        self.step = StepState(step)
        self._refresh()

    def phase_started(self, name: str) -> None:
        if self.step and name != "gen":
            self.step.current, self.step.current_started = name, time.monotonic()
            self._refresh()

    def phase_finished(self, name: str, seconds: float) -> None:
        if self.step and name != "gen":
            self.step.done[name] = self.step.done.get(name, 0.0) + seconds
            self.step.current = None
            self._refresh()

    def round_finished(self) -> None:
        if self.step:
            self.last_step_s = dict(self.step.done)
        self._stop()

    def log(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False)

    def warn(self, text: str) -> None:
        """A warning above the display, once per distinct text."""
        if text not in self._said:
            self._said.add(text)
            from rich.text import Text

            self.console.print(Text(f"Warning: {text}", style="yellow"))  # a styled Text: the display keeps its own

    def capture_warnings(self) -> None:
        """Print Python warnings and logged warnings through `warn` until `close`."""
        if self._restore is None:
            self._restore = _route_warnings(self.warn)

    def close(self) -> None:
        self._stop()
        if self._restore is not None:
            self._restore()
            self._restore = None

    # --- drawing -----------------------------------------------------------------------------
    def render(self):
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        r = self.round
        lines = []
        if r is not None:
            total = r.expansions * max(self.tasks, 1)
            head = Table.grid(padding=(0, 1))
            head.add_row(Text(f"Round {r.round}", style="bold"),
                         ProgressBar(total=total, completed=r.executed_expansions, width=24),
                         Text(f"{r.executed_expansions}/{total} task-expansions  "
                              f"{_clock(time.monotonic() - r.started)}  ETA {_clock(r.eta_s(self.tasks))}"))
            lines += [head,
                      Text(f"  generated {r.rows:,} rows, {r.tokens:,} tokens"),
                      Text(f"  executed {r.executed:,} nodes: " + _statuses(r.statuses))]
        if self.step is not None:
            lines.append(self._step_line())
        return Group(*lines)

    def _step_line(self):
        from rich.text import Text

        s = self.step
        parts = [f"{name} {seconds:.1f} s" for name, seconds in s.done.items()]
        if s.current:
            parts.append(f"{s.current} … {time.monotonic() - s.current_started:.1f} s")
        head = f"Step {s.step}  "
        items = [*(parts or ["starting"]), f"ETA {_clock(self._step_eta())}"]
        line = Text(head, style="bold")
        line.append(_between_items(items, self.console.width, len(head)))
        return line

    def _step_eta(self) -> float | None:
        """The previous step's total minus this step's time so far (None for the first step)."""
        if not self.last_step_s or self.step is None:
            return None
        return max(sum(self.last_step_s.values()) - (time.monotonic() - self.step.started), 0.0)

    def _start(self) -> None:
        from rich.live import Live

        self._stop()
        self.live = Live(self, console=self.console, refresh_per_second=4, transient=True,
                         redirect_stdout=True, redirect_stderr=True)
        self.live.start()

    def _refresh(self) -> None:
        if self.live is not None:
            self.live.refresh()

    def _stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def __rich__(self):
        return self.render()


class _WarningHandler(logging.Handler):
    """Logged warnings (and worse) of any logger that reaches the root, to `warn`."""

    def __init__(self, warn):
        super().__init__(logging.WARNING)
        self.warn = warn

    def emit(self, record: logging.LogRecord) -> None:
        self.warn(record.getMessage())


def _route_warnings(warn):
    """Send Python warnings and logged warnings to `warn`; returns the function that undoes it."""
    shown, handler, root = warnings.showwarning, _WarningHandler(warn), logging.getLogger()

    def show(message, category, filename, lineno, file=None, line=None):
        warn(f"{category.__name__}: {message}")

    warnings.showwarning = show
    root.addHandler(handler)

    def restore():
        warnings.showwarning = shown
        root.removeHandler(handler)

    return restore


def _between_items(items: list[str], width: int, used: int, sep: str = " · ", indent: str = "  ") -> str:
    """`items` joined by `sep` in lines of at most `width` characters (the first has `used` of
    them already), broken only between items, so no phase's name and its seconds are parted."""
    lines, line = [], ""
    for item in items:
        room = width - (used if not lines else 0)
        if line and len(line) + len(sep) + len(item) > room:
            lines.append(line + sep.rstrip())
            line = indent + item
        else:
            line = f"{line}{sep}{item}" if line else item
    return "\n".join([*lines, line])


def step_line(step: int, metrics: dict, seconds: float | None = None) -> str:
    """`Step 3: loss 0.0123 · kl 0.00041 · entropy 1.23 · clip 0.02 · lr 1e-05 · 4,096 tokens ·
    12.3 s`: what a researcher watches, in one short line; the step's other metrics (pg_loss,
    kl_coef, grad_norm, micro-batches, memory) are in its step_metrics row."""
    if metrics.get("skipped"):
        return f"Step {step}: skipped ({metrics['skipped']})"
    m = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    parts = [f"{label} {m[key]:.3g}" for label, key in (("loss", "loss"), ("kl", "kl"), ("entropy", "entropy"),
                                                          ("clip", "clip_frac"), ("lr", "lr")) if key in m]
    if "tokens" in m:
        parts.append(f"{m['tokens']:,} tokens")
    if seconds is not None:
        parts.append(f"{seconds:.1f} s")
    return f"Step {step}: " + " · ".join(parts)


def _statuses(counts: Counter) -> str:
    if not counts:
        return "-"
    return " · ".join(f"{status} {n}" for status, n in
                      sorted(counts.items(), key=lambda kv: (kv[0] != OK, -kv[1], kv[0])))


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
