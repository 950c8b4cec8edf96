"""The plain HTML tables of `warehouse report`'s pages (tree-search and reward-model runs)."""
from __future__ import annotations

import html

from warehouse.formatting import format_column


def html_table(columns: list[str], rows: list[dict], digits: int = 4) -> str:
    """One <table>: a header row of `columns`, then each row's values as the terminal writes
    them (warehouse.formatting: a missing one is NULL, one precision per float column of
    `digits` significant digits)."""
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    cells = [format_column([r.get(c) for r in rows], digits) for c in columns]
    body = "".join("<tr>" + "".join(f"<td>{esc(column[i])}</td>" for column in cells) + "</tr>"
                   for i in range(len(rows)))
    return f"<table><tr>{head}</tr>{body}</table>"
