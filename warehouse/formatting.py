"""How a value reads in a table: one spelling for NULL, booleans and numbers everywhere.

The terminal (`warehouse sql`, `tables`, `check`, `metrics`), the HTML report and the
dashboard's cells all format through here, so a missing value is `NULL` in each of them, a
boolean is `true`/`false` (SQL's words, not Python's), and a column of floats carries one
number of decimals (no ragged `0.5` above `0.3333333`).
"""
from __future__ import annotations

import datetime
import decimal
import math

NULL = "NULL"
SIGNIFICANT = 4  # digits of a column's largest float
MAX_DECIMALS = 6
# a column whose largest magnitude lies outside [SCI_BELOW, SCI_FROM) is written 1.234e-05
SCI_BELOW, SCI_FROM = 1e-3, 1e7


def format_value(value, digits: int = SIGNIFICANT) -> str:
    """One value on its own (a cell outside a column): floats to `digits` significant digits."""
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.{digits}g}"
    return _text(value)


def format_column(values, digits: int = SIGNIFICANT) -> list[str]:
    """A column's values; its floats share one precision: `digits` significant digits of the
    largest, trailing zeros that every value has dropped down to one decimal (0.5, 0.25 ->
    0.50, 0.25; 1.0, 2.0 -> 1.0, 2.0)."""
    floats = [abs(float(v)) for v in values if _is_float(v) and math.isfinite(float(v))]
    if not floats:
        return [format_value(v, digits) for v in values]
    spec = _float_spec(max(floats), digits)
    texts = [format(float(v), spec) if _is_float(v) and math.isfinite(float(v)) else None for v in values]
    texts = _drop_common_zeros(texts) if spec.endswith("f") else texts
    return [t if t is not None else format_value(v, digits) for t, v in zip(texts, values)]


def is_number(value) -> bool:
    """An int, float or Decimal, not a boolean: what a table right-aligns."""
    return isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool)


def _is_float(value) -> bool:
    return isinstance(value, (float, decimal.Decimal))


def _float_spec(largest: float, digits: int) -> str:
    if largest and not SCI_BELOW <= largest < SCI_FROM:
        return f".{digits - 1}e"
    magnitude = math.floor(math.log10(largest)) if largest else 0
    return f".{min(max(digits - 1 - magnitude, 0), MAX_DECIMALS)}f"


def _drop_common_zeros(texts: list[str | None]) -> list[str | None]:
    shown = [t for t in texts if t is not None]
    while shown and all("." in t and t.endswith("0") and not t.endswith(".0") for t in shown):
        texts = [t[:-1] if t is not None else None for t in texts]
        shown = [t for t in texts if t is not None]
    return texts


def _text(value) -> str:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):  # NaN and the infinities, as DuckDB writes them
        return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, decimal.Decimal):
        return format_value(float(value))
    return str(value)


# Characters that move the cursor, recolour or rewrite a terminal, or reorder text: shown as
# escapes. C0 and C1 controls, DEL, the line and paragraph separators, the bidi overrides.
_SHOWN_AS = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_FORMAT_CONTROLS = {0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C}


def visible(text: str, keep: str = "") -> str:
    """``text`` with every control character written as its escape (``\\x1b``, ``\\n``, ...),
    but those in ``keep``: a value printed to a terminal is read, never obeyed."""
    if text.isprintable() and (text.isascii() or not any(ord(c) in _FORMAT_CONTROLS for c in text)):
        return text  # printable ASCII holds no format control: no character looked at one by one
    out = []
    for c in text:
        code = ord(c)
        if c in keep or (c.isprintable() and code not in _FORMAT_CONTROLS) or (c == " "):
            out.append(c)
        elif c in _SHOWN_AS:
            out.append(_SHOWN_AS[c])
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        else:
            out.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)
