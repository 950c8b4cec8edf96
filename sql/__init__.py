"""Report metrics as SQL views, one per file. Applied by `warehouse init`/`upgrade`."""
from __future__ import annotations

import re

_CREATE = re.compile(r'^CREATE OR REPLACE VIEW "(?P<name>[^"]+)" AS\s*$', re.M)


def view_body(name: str) -> str:
    """The view's SELECT, what follows its CREATE line (the header comment, which states the
    grain, stays in the file), as a BI tool's virtual dataset (Superset's SQL Lab) takes it."""
    from importlib import resources

    path = resources.files(__name__) / f"{name}.sql"
    if not path.is_file():
        from warehouse.errors import TerminalError

        known = sorted(p.name[:-4] for p in resources.files(__name__).iterdir() if p.name.endswith(".sql"))
        raise TerminalError(f"no view {name!r} in sql/; the views: {', '.join(known)}")
    text = path.read_text(encoding="utf-8")
    match = _CREATE.search(text)
    return text[match.end():].strip().rstrip(";").rstrip() + "\n"
