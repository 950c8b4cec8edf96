"""The plain HTML tables of `warehouse report`'s pages (tree-search and reward-model runs)."""
from __future__ import annotations

import html


def html_table(columns: list[str], rows: list[dict], digits: int = 4) -> str:
    """One <table>: a header row of `columns`, then each row's values (a missing one is NULL),
    floats to `digits` significant digits."""
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{esc(_cell(r.get(c), digits))}</td>" for c in columns)
                   + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(value, digits: int) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)
