"""Query parameters the pages read: integers bounded by the warehouse's columns (a 400 otherwise)."""
from __future__ import annotations

from warehouse.errors import TerminalError


class BadRequestError(TerminalError):
    """A query parameter the warehouse cannot hold (a number out of its column's range): 400."""


INT32 = (-2**31, 2**31 - 1)  # a round, a k: INTEGER columns
INT64 = (-2**63, 2**63 - 1)


def query_int(params, name: str, bounds: tuple[int, int] = INT32) -> int | None:
    """The integer ``name`` of ``params``: None when absent or not an integer; BadRequestError
    when it is one the warehouse's column cannot hold."""
    text = (params.get(name) or "").strip()
    try:
        value = int(text) if text else None
    except ValueError:
        return None
    if value is not None and not bounds[0] <= value <= bounds[1]:
        raise BadRequestError(f"{name}={text[:40]}: out of range ({bounds[0]:,} to {bounds[1]:,})")
    return value
