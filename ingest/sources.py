"""The `sources` ledger: one row per file (or trainer write), its hash, and its errors.

A changed source replaces its rows: `open_source` deletes everything the previous load of the
same path wrote, under the same `source_id`, inside the caller's transaction.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone

# Tables whose rows belong to one source (deleted when the source is reloaded); the token
# index's entries of a source are let go by `warehouse.tokens.forget_sources`.
OWNED_BY_SOURCE = ("nodes", "node_payloads", "node_train_tokens", "steps", "wandb_history",
                   "ingest_errors", "rm_runs", "rm_references", "rm_budgets", "rm_jobs", "rm_steps",
                   "rm_artifacts", "rm_evaluations", "rm_eval_sections")


@dataclass(frozen=True)
class Source:
    source_id: int
    path: str
    kind: str
    run_id: str | None = None
    round: int | None = None
    task: str | None = None


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def known_sources(con) -> dict[str, tuple]:
    """path -> (source_id, size_bytes, mtime_ns, content_hash, rows_rejected, error)."""
    rows = con.execute("SELECT path, source_id, size_bytes, mtime_ns, content_hash, "
                       "rows_rejected, error FROM sources").fetchall()
    return {r[0]: r[1:] for r in rows}


def lookup_source_id(con, path: str) -> tuple[int, bool]:
    """(the id of `path`, True) if known, else (a fresh id, False)."""
    row = con.execute("SELECT source_id FROM sources WHERE path = ?", [path]).fetchone()
    if row:
        return row[0], True
    return con.execute("SELECT coalesce(max(source_id), 0) + 1 FROM sources").fetchone()[0], False


def lookup_source_ids(con, paths: list[str]) -> tuple[dict[str, int], int]:
    """({path: its id} for the known ones of `paths`, the id a new source would take)."""
    found = dict(con.execute("SELECT path, source_id FROM sources WHERE path IN (SELECT unnest(CAST(? AS VARCHAR[])))",
                             [list(paths)]).fetchall()) if paths else {}
    return found, con.execute("SELECT coalesce(max(source_id), 0) + 1 FROM sources").fetchone()[0]


def open_source(con, *, source_id: int, existed: bool, path: str, kind: str, run_id=None,
                round=None, task=None, size_bytes=None, mtime_ns=None, digest=None, rows=0,
                rejected=0, error=None) -> Source:
    """Write the `sources` row of `path`; when it `existed`, first delete every old row of it.

    A failed source (`error` set) keeps no hash, so the next ingest tries it again.
    """
    return open_sources(con, [dict(source_id=source_id, existed=existed, path=path, kind=kind,
                                   run_id=run_id, round=round, task=task, size_bytes=size_bytes,
                                   mtime_ns=mtime_ns, digest=digest, rows=rows, rejected=rejected,
                                   error=error)])[0]


SOURCE_COLUMNS = ("source_id", "path", "kind", "run_id", "round", "task", "size_bytes", "mtime_ns",
                  "content_hash", "rows", "rows_rejected", "ingested_at", "error")


def open_sources(con, specs: list[dict]) -> list[Source]:
    """`open_source` for several sources (each spec: its keyword arguments, all given), the
    new `sources` rows in one INSERT."""
    from warehouse.tokens import forget_sources

    forget_sources(con, [spec["source_id"] for spec in specs if spec["existed"]])
    for spec in specs:
        if spec["existed"]:
            for table in OWNED_BY_SOURCE:
                con.execute(f"DELETE FROM {table} WHERE source_id = ?", [spec["source_id"]])
            con.execute("DELETE FROM sources WHERE source_id = ?", [spec["source_id"]])
    now = _now()
    values = [[s["source_id"], s["path"], s["kind"], s["run_id"], s["round"], s["task"], s["size_bytes"],
               s["mtime_ns"], None if s["error"] else s["digest"], s["rows"], s["rejected"], now, s["error"]]
              for s in specs]
    marks = ", ".join("(" + ", ".join("?" for _ in SOURCE_COLUMNS) + ")" for _ in values)
    con.execute(f"INSERT INTO sources ({', '.join(SOURCE_COLUMNS)}) VALUES {marks}",
                [v for row in values for v in row])
    return [Source(s["source_id"], s["path"], s["kind"], s["run_id"], s["round"], s["task"]) for s in specs]


def touch_source(con, path: str, mtime_ns: int) -> None:
    """Same content, new mtime: remember the mtime so the next check needs no hash."""
    con.execute("UPDATE sources SET mtime_ns = ? WHERE path = ?", [mtime_ns, path])


def record_errors(con, source: Source, errors: dict[int, str]) -> None:
    """One ingest_errors row per line (reasons of one line joined)."""
    if not errors:
        return
    now = _now()
    con.executemany(
        "INSERT INTO ingest_errors (source_id, line_no, path, run_id, reason, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [[source.source_id, line_no, source.path, source.run_id, reason, now]
         for line_no, reason in sorted(errors.items())])


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)
