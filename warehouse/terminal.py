"""Metric views printed for a person at a terminal: a few key columns that fit the width.

The views are wide (task_round_metrics has 40 columns); squeezed into one table every header
is folded into fragments. Here a table shows the view's key columns (`DEFAULT_COLUMNS`, or
the caller's choice), one table per run with the run id as its title, headers broken only at
underscores, numbers to four significant digits. One row of a one-key view (a run's
run_metrics) reads as a vertical key/value list instead. CSV and JSON never come through
here: they keep every column.
"""
from __future__ import annotations

import io
import shutil

from warehouse.errors import TerminalError
from warehouse.query import Result

#: The columns `warehouse metrics` prints by default, per view (the rest: --all / --columns).
DEFAULT_COLUMNS: dict[str, tuple[str, ...]] = {
    "task_round_metrics": ("run_id", "round", "task", "nodes", "valid_rate", "valid_reward_mean",
                           "reward_best", "groups_with_signal_rate", "resp_clip_rate"),
    "round_metrics": ("run_id", "round", "tasks", "tasks_with_spread", "nodes", "fresh_drafts",
                      "total_s", "per_node_step_s"),
    "run_metrics": ("run_id", "arm", "rounds", "steps_logged", "nodes"),
    "run_status_counts": ("run_id", "status", "n"),
    "decision_rule": ("run_id", "task", "k", "valid_reward_mean", "delta", "moved"),
    "invariant_violations": ("check_no", "run_id", "round", "task", "node_id", "detail"),
    # the reward-model views (seed 004)
    "rm_best_final": ("run_id", "evaluation_id", "progress", "score", "se", "reference_score", "gap"),
    "rm_proxy_vs_final": ("run_id", "job", "progress", "proxy_split", "proxy_score", "final_score",
                          "final_minus_proxy"),
    "rm_exploration_vs_formal": ("run_id", "exploration_job", "exploration_score", "formal_score",
                                 "delta", "survived"),
    "rm_scores_by_progress": ("run_id", "phase", "job", "split", "progress", "n", "score", "se", "trend"),
    "rm_section_deltas": ("run_id", "section", "from_job", "from_score", "to_job", "to_score", "delta"),
    "rm_budget_use": ("run_id", "phase", "budget_use", "stop_reason", "steps", "members"),
    "rm_job_summary": ("run_id", "phase", "job", "steps_done", "seconds", "status", "proxy_score"),
    "rm_violations": ("check_no", "run_id", "job", "item", "detail"),
}


def metrics_table(view: str, result: Result, columns: list[str] | None = None,
                  all_columns: bool = False, width: int | None = None) -> str:
    """The terminal table of `warehouse metrics`: `columns` if given, else every column for a
    single row (it is printed vertically) or with `all_columns`, else the view's key columns."""
    if columns:
        result = select_columns(result, columns)
    elif not all_columns and len(result.rows) != 1:
        result = select_columns(result, default_columns(view, result))
    return render_for_terminal(result, width)


def select_columns(result: Result, columns: list[str] | tuple[str, ...]) -> Result:
    """`result` with only `columns`, in that order; unknown names are one clear error."""
    unknown = [c for c in columns if c not in result.columns]
    if unknown:
        raise TerminalError(f"--columns: no column {', '.join(map(repr, unknown))} in this view; "
                            f"it has: {', '.join(result.columns)}")
    index = [result.columns.index(c) for c in columns]
    return Result(list(columns), [tuple(row[i] for i in index) for row in result.rows])


def default_columns(view: str, result: Result) -> list[str]:
    """The view's key columns that this warehouse's view has (all of them for an unknown view)."""
    wanted = DEFAULT_COLUMNS.get(view)
    return [c for c in wanted if c in result.columns] if wanted else list(result.columns)


def render_for_terminal(result: Result, width: int | None = None) -> str:
    """One run's single row as `key  value` lines, else one table per run (titled by run id)."""
    width = width or terminal_width()
    console = _console(width)
    if len(result.rows) == 1 and "run_id" in result.columns:
        console.print(_vertical(result))
    else:
        for title, part in _per_run(result):
            console.print(_fitted_table(console, part, title))
        console.print(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})")
    return "".join(line.rstrip() + "\n" for line in console.file.getvalue().splitlines())


def terminal_width() -> int:
    """The terminal's width ($COLUMNS first), 80 when unknown (a pipe, a CI log)."""
    return shutil.get_terminal_size((80, 24)).columns


def format_value(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def header(name: str, width: int = 12) -> str:
    """A column name broken only after underscores, in lines of at most `width` characters
    (a single longer part stays whole): 'groups_with_signal_rate' -> 'groups_with_\\nsignal_rate'."""
    return _break_after(name, "_", width)


def _break_after(text: str, sep: str, room: int) -> str:
    """`text` broken after `sep`: a line grows by a part while it (with the part's `sep`) stays
    within `room` characters."""
    lines, line = [], ""
    for part in text.split(sep):
        piece = part if not line else sep + part
        if line and len(line) + len(piece) > room:
            lines.append(line + sep)
            line = part
        else:
            line += piece
    return "\n".join(lines + [line])


def _per_run(result: Result):
    """(title, rows) per run, without the run_id column, when a run has several rows; else the
    whole result as one table (run_metrics: one row per run)."""
    at = result.columns.index("run_id") if "run_id" in result.columns else None
    runs: dict = {}
    for row in result.rows:
        runs.setdefault(None if at is None else row[at], []).append(row)
    if at is None or len(result.columns) == 1 or len(runs) == len(result.rows):
        yield None, result
        return
    columns = [c for c in result.columns if c != "run_id"]
    for run_id, rows in runs.items():
        yield f"run {run_id}", Result(columns, [row[:at] + row[at + 1:] for row in rows])


def _fitted_table(console, result: Result, title: str | None):
    """The table whose headers are broken at the widest line width that still fits."""
    from rich.measure import Measurement

    unbounded = console.options.update_width(10_000)  # Measurement clamps to the options' width
    for header_width, text_width in ((24, None), (16, None), (12, None), (10, None), (8, None),
                                     (6, None), (6, 24), (6, 16)):
        table = _table(result, title, header_width, text_width)
        if Measurement.get(console, unbounded, table).maximum <= console.width:
            return table
    return table  # too many columns for the terminal: rich folds the widest


def _table(result: Result, title: str | None, header_width: int = 12, text_width: int | None = None):
    from rich import box
    from rich.table import Table

    # one space of padding left of each column, plus the box's blank divider: two between columns
    table = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False, header_style="bold", padding=(0, 0, 0, 1))
    for name in result.columns:
        numeric = any(isinstance(r[result.columns.index(name)], (int, float)) for r in result.rows)
        table.add_column(header(name, header_width), justify="right" if numeric else "left", overflow="fold",
                         no_wrap=name == "run_id")  # an id cut in two is no use: other columns fold first
    for row in result.rows:
        table.add_row(*(_wrapped(format_value(v), text_width) if isinstance(v, str) else format_value(v)
                        for v in row))
    return table


def _wrapped(text: str, width: int | None) -> str:
    """A long slug broken after hyphens into lines of at most `width` (the table's last resort)."""
    if width is None or len(text) <= width or "-" not in text:
        return text
    return _break_after(text, "-", width - 1)  # room for the hyphen that ends a broken line


def _vertical(result: Result):
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE, show_header=False, show_edge=False, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for name, value in zip(result.columns, result.rows[0]):
        table.add_row(name, format_value(value))
    return table


def _console(width: int):
    from rich.console import Console

    return Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None,
                   highlight=False)
