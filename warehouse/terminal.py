"""Tables printed for a person at a terminal, sized to its width as the DuckDB CLI sizes them.

Every table (`warehouse sql`, `tables`, `check`, `metrics`) is laid out here: no wider than
`$COLUMNS` (80 in a pipe), a long cell cut with an ellipsis, numbers and ids never cut and
numbers right-aligned, headers broken only at underscores, and when even the narrowest
columns do not fit, the middle columns left out (a `…` column where they were) and counted
under the table. Values read as :mod:`warehouse.formatting` writes them (NULL, true/false,
one precision per float column). Every name and value is text, never rich markup (`[bold]`
prints as written), and its control characters print as escapes (`\x1b`, `\n`).

`warehouse metrics` shows a view's key columns (`DEFAULT_COLUMNS`, or the caller's choice),
one table per run with the run id as its title; one row of a one-key view (a run's
run_metrics) reads as a vertical key/value list instead. `render` also writes a result as
CSV or JSON, which keep every column and every value whole.
"""
from __future__ import annotations

import csv
import io
import json
import math
import shutil
from dataclasses import dataclass
from functools import cached_property

from warehouse.errors import TerminalError
from warehouse.formatting import format_column, format_value, is_number, visible
from warehouse.query import Result


def _jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if hasattr(value, "__float__") and not isinstance(value, (int, float, bool)):
        return float(value)  # Decimal
    return value


def render(result: Result, fmt: str) -> str:
    """Render as `table` (aligned text), `csv` or `json` (a list of objects)."""
    if fmt == "json":
        records = [dict(zip(result.columns, map(_jsonable, row))) for row in result.rows]
        return json.dumps(records, indent=2, ensure_ascii=False) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows(["" if v is None else v for v in row] for row in result.rows)
        return buf.getvalue()
    return table_text(result)


#: The columns `warehouse metrics` prints by default, per view (the rest: --all / --columns).
DEFAULT_COLUMNS: dict[str, tuple[str, ...]] = {
    "task_round_metrics": ("run_id", "round", "task", "nodes", "valid_rate", "valid_reward_mean",
                           "reward_best", "groups_with_signal_rate", "resp_clip_rate"),
    "round_metrics": ("run_id", "round", "tasks", "tasks_with_spread", "nodes", "fresh_drafts",
                      "total_s", "per_node_step_s"),
    # the dashboard's runs table: which run is best (in bands of columns on a narrow terminal)
    "run_metrics": ("run_id", "state", "arm", "model", "response_cap", "rounds", "steps_logged",
                    "valid_reward_mean_latest", "valid_reward_mean_best", "valid_rate", "reward_best",
                    "loss_latest", "last_activity_at"),
    "run_status_counts": ("run_id", "status", "n"),
    "decision_rule": ("run_id", "task", "k", "valid_reward_mean", "delta", "moved"),
    "invariant_violations": ("check_no", "run_id", "round", "task", "node_id", "detail"),
    # the reward-model views (data root 004)
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
    return render_for_terminal(result, width, banded=not all_columns)


def select_columns(result: Result, columns: list[str] | tuple[str, ...]) -> Result:
    """`result` with only `columns`, in that order; unknown names are one clear error."""
    unknown = [c for c in columns if c not in result.columns]
    if unknown:
        raise TerminalError(f"--columns: no column {', '.join(map(repr, unknown))} in this view; "
                            f"it has: {', '.join(result.columns)}")
    index = [result.columns.index(c) for c in columns]
    types = None if result.types is None else [result.types[i] for i in index]
    return Result(list(columns), [tuple(row[i] for i in index) for row in result.rows], types)


def default_columns(view: str, result: Result) -> list[str]:
    """The view's key columns that this warehouse's view has (all of them for an unknown view)."""
    wanted = DEFAULT_COLUMNS.get(view)
    return [c for c in wanted if c in result.columns] if wanted else list(result.columns)


def render_for_terminal(result: Result, width: int | None = None, banded: bool = False) -> str:
    """One run's single row as `key  value` lines, else one table per run (titled by run id).
    `banded`: a table too wide for the terminal is printed in bands of columns, each led by
    its first column, so every chosen column is kept; else the middle columns are left out."""
    width = width or terminal_width()
    console = _console(width)
    if len(result.rows) == 1 and "run_id" in result.columns:
        console.print(_vertical(result))
        return _text(console)
    dropped = bands = 0
    for title, part in _per_run(result):
        if banded:
            bands = max(bands, _print_banded(console, part, title))
        else:
            dropped = max(dropped, _print_fitted(console, part, title))
    text = footer(result, dropped, "--columns or --format csv")
    if bands > 1:
        text = text[:-1] + f"; {bands} bands of columns, each led by {result.columns[0]})"
    console.print(text, markup=False)
    return _text(console)


def table_text(result: Result, width: int | None = None) -> str:
    """Any result as one table sized to the terminal (`warehouse sql`, `tables`, `check`):
    long cells cut in the middle (different cells stay different); columns that even cut
    cannot fit side by side are printed in bands, each led by the first column, so every
    selected column is shown."""
    console = _console(width or terminal_width())
    columns = _columns(result)
    shown, _ = _layout(columns, console.width)
    if len(shown) == len(result.columns):
        _print_fitted(console, result, None, columns)
        console.print(footer(result, 0, "--format csv"), markup=False)
        return _text(console)
    bands = _print_banded(console, result, None)
    console.print(footer(result, 0, "--format csv")[:-1] + f"; {bands} bands of columns, each led by "
                  f"{result.columns[0]})", markup=False)
    return _text(console)


def footer(result: Result, dropped: int, rest: str) -> str:
    """`(3 rows)`, and what was left out: `(3 rows; 9 of 14 columns shown, --format csv for all)`."""
    rows = f"{len(result.rows)} row{'s' if len(result.rows) != 1 else ''}"
    if not dropped:
        return f"({rows})"
    n = len(result.columns)
    return f"({rows}; {n - dropped} of {n} columns shown, {rest} for all)"


def terminal_width() -> int:
    """The terminal's width ($COLUMNS first), 80 when unknown (a pipe, a CI log)."""
    return shutil.get_terminal_size((80, 24)).columns


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
    types = None if result.types is None else [t for c, t in zip(result.columns, result.types) if c != "run_id"]
    for run_id, rows in runs.items():
        yield f"run {run_id}", Result(columns, [row[:at] + row[at + 1:] for row in rows], types)


# --- the layout ------------------------------------------------------------------------------

GAP = 2  # a padding space and the box's blank divider between two columns
TEXT_FLOOR = 10  # a text column is cut to no fewer characters than this (its header's words stay whole)
HEADER_WORD_CAP = 16
KEY_ROOM = 30  # a banded table's leading column is given up to this many characters in each band
_NUMERIC_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                  "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL", "REAL"}


@dataclass
class _Column:
    name: str
    cells: list[str]
    numeric: bool
    whole: bool  # never cut: numbers
    is_id: bool = False  # grown back to whole first when there is room (ids are what one copies)

    @property
    def header_need(self) -> int:
        """The narrowest width at which the header breaks only after underscores."""
        parts = self.name.split("_")
        return min(max(len(p) + (i < len(parts) - 1) for i, p in enumerate(parts)), HEADER_WORD_CAP)

    @property
    def natural(self) -> int:
        return max([len(self.name), *map(len, self.cells)])

    @cached_property
    def floor(self) -> int:
        longest = max([0, *map(len, self.cells)])
        return max(self.header_need, longest if self.whole else distinct_width(self.cells, TEXT_FLOOR))


def cut_middle(text: str, width: int) -> str:
    """`text` in at most `width` characters, cut in the middle with `…`, keeping two thirds for
    the tail, where names differ (`20261201_0215…3f9a0c_hr24k_u6`, `text-norm…hallenge-russian`)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    head = (width - 1) // 3
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def distinct_width(cells: list[str], least: int) -> int:
    """The narrowest width, from `least` up, at which cutting in the middle keeps every two
    different cells different (two tasks never print as one), capped at the longest cell."""
    values = set(cells)
    longest = max([0, *map(len, values)])
    for width in range(min(least, longest), longest):
        if len({cut_middle(v, width) for v in values}) == len(values):
            return width
    return longest


def _columns(result: Result) -> list[_Column]:
    columns = []
    for i, name in enumerate(result.columns):
        values = [row[i] for row in result.rows]
        declared = result.types[i] if result.types else None
        numeric = (str(declared).split("(")[0] in _NUMERIC_TYPES if declared is not None
                   else any(is_number(v) for v in values))
        is_id = name == "run_id" or name.endswith("_id")
        moment = declared is not None and str(declared).startswith(("TIMESTAMP", "DATE", "TIME"))
        columns.append(_Column(visible(name), [visible(c) for c in format_column(values)], numeric,
                               numeric or moment, is_id))  # a time cut in the middle says nothing
    return columns


def _layout(columns: list[_Column], width: int) -> tuple[list[int], list[int]]:
    """(indexes of the columns shown, their widths): every column at its floor if all fit,
    else as many as fit taken from both ends (the DuckDB CLI's way), a `…` column between;
    then the room left goes evenly to the columns whose cells are cut, then to headers."""
    def total(shown):
        return sum(min(columns[i].floor, width) for i in shown) + GAP * (len(shown) - 1)

    shown = list(range(len(columns)))
    if total(shown) > width:
        ends = [i for pair in zip(shown, reversed(shown)) for i in pair][:len(shown)]
        shown = []
        for i in dict.fromkeys(ends):
            if shown and total(sorted([*shown, i])) + 1 + GAP > width:
                break
            shown.append(i)
        shown.sort()
    widths = [min(columns[i].floor, width) for i in shown]
    room = width - total(shown) - (1 + GAP if len(shown) < len(columns) else 0)
    longest = [max([0, *map(len, columns[i].cells)]) for i in shown]
    ids_first = [n if columns[i].is_id else w for i, n, w in zip(shown, longest, widths)]
    for goals in (ids_first, longest, [columns[i].natural for i in shown]):  # ids, cells, then headers
        room = _fill(widths, goals, room)
    return shown, widths


def _fill(widths: list[int], goals: list[int], room: int) -> int:
    """Grow `widths` toward `goals`, an equal share each round; returns the room left."""
    while room > 0:
        short = [k for k, goal in enumerate(goals) if widths[k] < goal]
        if not short:
            break
        share = max(1, room // len(short))
        for k in short:
            grow = min(share, goals[k] - widths[k], room)
            widths[k] += grow
            room -= grow
    return room


def _print_banded(console, result: Result, title: str | None) -> int:
    """Print `result` in bands of columns no wider than the console, each led by the first
    column (as pandas wraps a wide frame), so no column is left out; returns the bands."""
    columns = _columns(result)
    width = console.width
    if len(columns) < 2:
        _print_fitted(console, result, title)
        return 1

    lead = columns[0]
    # the leading column (the run id) is packed at up to KEY_ROOM characters, so each band has
    # room to show it readably rather than cut to its floor
    lead_width = min(width, max(lead.floor, min(KEY_ROOM, max([0, *map(len, lead.cells)]))))

    def need(band: list[int]) -> int:
        return lead_width + sum(min(columns[i].floor, width) for i in band[1:]) + GAP * (len(band) - 1)

    bands, band = [], [0]
    for i in range(1, len(columns)):
        if len(band) > 1 and need([*band, i]) > width:
            bands.append(band)
            band = [0, i]
        else:
            band.append(i)
    bands.append(band)
    for k, band in enumerate(bands):
        if k:
            console.print()
        _print_fitted(console, select_columns(result, [result.columns[i] for i in band]), title if k == 0 else None)
    return len(bands)


#: Rows past which a table's body is written as plain lines: rich lays a table out at about
#: 0.5 ms a row (4,317 rows of `warehouse token ID --nodes`: 2.2 s of a 2.9 s command).
PLAIN_ROWS_AFTER = 100


def _print_fitted(console, result: Result, title: str | None, columns: list[_Column] | None = None) -> int:
    """Print `result` as a table no wider than the console; returns how many columns were left out.
    rich lays out the title, the header and the first PLAIN_ROWS_AFTER rows; the rest are
    written as the same lines directly when every cell is printable ASCII (one character a
    cell), else rich lays out every row."""
    columns = columns if columns is not None else _columns(result)
    shown, widths = _layout(columns, console.width)
    rows = len(columns[0].cells) if columns else 0
    plain = rows > PLAIN_ROWS_AFTER and all(
        cell.isascii() and cell.isprintable() for i in shown for cell in columns[i].cells[PLAIN_ROWS_AFTER:])
    gap_at = next((k for k, i in enumerate(shown) if i != k), None)  # where the left-out columns were
    console.print(_table(columns, shown, widths, title, gap_at, PLAIN_ROWS_AFTER if plain else rows))
    if plain:
        justify = [str.rjust if columns[i].numeric else str.ljust for i in shown]
        spans = widths if gap_at is None else [*widths[:gap_at], 1, *widths[gap_at:]]
        if gap_at is not None:
            justify.insert(gap_at, str.ljust)
        console.file.write("".join(
            "  ".join(j(cell, w) for j, cell, w in zip(justify, _row_cells(columns, shown, widths, gap_at, r), spans)).rstrip()
            + "\n" for r in range(PLAIN_ROWS_AFTER, rows)))  # as rich prints them: blank divider, padding space
    return len(columns) - len(shown)


def _row_cells(columns: list[_Column], shown: list[int], widths: list[int], gap_at: int | None, r: int) -> list[str]:
    """Row `r`'s shown cells cut to their widths, with "…" where the left-out columns were."""
    cells = [cut_middle(columns[i].cells[r], w) for i, w in zip(shown, widths)]
    return cells if gap_at is None else [*cells[:gap_at], "…", *cells[gap_at:]]


def _table(columns: list[_Column], shown: list[int], widths: list[int], title: str | None, gap_at: int | None,
           rows: int):
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(visible(title)) if title is not None else None, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False, header_style="bold", padding=(0, 0, 0, 1))
    for k, (i, w) in enumerate(zip(shown, widths)):
        if k == gap_at:
            table.add_column("…", width=1, no_wrap=True)
        column = columns[i]
        table.add_column(Text(header(column.name, w)), width=w, no_wrap=True, overflow="ellipsis",
                         justify="right" if column.numeric else "left")
    for r in range(rows):
        table.add_row(*map(Text, _row_cells(columns, shown, widths, gap_at, r)))
    return table


def _vertical(result: Result):
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE, show_header=False, show_edge=False, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for name, value in zip(result.columns, result.rows[0]):
        table.add_row(Text(visible(name)), Text(visible(format_value(value))))
    return table


def _text(console) -> str:
    return "".join(line.rstrip() + "\n" for line in console.file.getvalue().splitlines())


def _console(width: int):
    from rich.console import Console

    return Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None,
                   highlight=False)


# --- warnings and hints ----------------------------------------------------------------------

def one_line_warnings() -> None:
    """From now on a Python warning (a library's FutureWarning) prints as one line,
    `Warning: <first line of its message> (<category>)`, once per distinct text, instead of
    Python's two lines with the source file and the offending code."""
    import sys
    import warnings

    said: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None):
        first = (str(message).strip().splitlines() or [""])[0]
        text = f"Warning: {first} ({category.__name__})"
        if text not in said:
            said.add(text)
            print(text, file=file or sys.stderr)

    warnings.showwarning = show


def fit_command(words: str | list[str], width: int | None = None, indent: str = "    ") -> str:
    """A shell command (a string split at spaces, or its words, a quoted one kept whole) in
    lines of at most `width` characters, broken only between words, with ` \\` continuations,
    so it is still one command to copy (a word longer than a line stays whole on its line)."""
    width = width or terminal_width()
    lines, line = [], ""
    for word in words.split(" ") if isinstance(words, str) else words:
        if line and len(line) + 1 + len(word) + 2 > width:  # room for the " \" continuation
            lines.append(line + " \\")
            line = indent + word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line])
