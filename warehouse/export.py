"""Export the warehouse as Parquet, partitioned by run, for a data lake or a distributed engine.

Layout: `DIR/<relation>/run_id=<run>/data_0.parquet` for every table and view with a
`run_id` column (Hive partitioning, which Spark, Trino and DuckDB read as a column), and
`DIR/<relation>.parquet` for the few without one (arms, questions, sources...) and for an
empty relation (a partitioned write of no rows writes no file). The heavy
`node_payloads` (prompts, completions, token ids) are left out unless asked for; they are
then partitioned by their node's run.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from warehouse.errors import DiskError, TerminalError, disk_errno, disk_error, probe_writable

PAYLOADS = "node_payloads"
#: Alembic's bookkeeping is not data.
SKIPPED = {"alembic_version"}


@dataclass
class Exported:
    relation: str
    path: Path
    rows: int
    partitioned: bool


def export_parquet(url: str, out_dir: str | Path, payloads: bool = False,
                   overwrite: bool = False) -> list[Exported]:
    """Write every table and view of the warehouse under `out_dir` as Parquet."""
    from warehouse.db import connect
    from warehouse.migrate import require_head

    out = Path(out_dir)
    with connect(url, read_only=True) as con:
        require_head(con, url)
        relations = _relations(con, payloads)
        _prepare(out, [name for name, _ in relations], overwrite)
        return [_export_one(con, name, has_run, out) for name, has_run in relations]


def _relations(con, payloads: bool) -> list[tuple[str, bool]]:
    """(name, has a run_id column) for every table and view in the main schema."""
    rows = con.execute(
        "SELECT t.table_name, bool_or(c.column_name = 'run_id') "
        "FROM information_schema.tables AS t "
        "JOIN information_schema.columns AS c USING (table_schema, table_name) "
        "WHERE t.table_schema = 'main' GROUP BY t.table_name ORDER BY t.table_name"
    ).fetchall()
    keep = [(n, bool(r)) for n, r in rows if n not in SKIPPED]
    if payloads:
        return [(n, True if n == PAYLOADS else r) for n, r in keep]
    return [(n, r) for n, r in keep if n != PAYLOADS]


def _prepare(out: Path, names: list[str], overwrite: bool) -> None:
    targets = [p for n in names for p in (out / n, out / f"{n}.parquet") if p.exists()]
    if targets and not overwrite:
        raise TerminalError(
            f"{targets[0]} already exists. Pass --overwrite to replace the export in {out}."
        )
    probe_writable(out, "write the export into", "Export into a folder you can write.")
    for path in targets:
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def _export_one(con, name: str, has_run: bool, out: Path) -> Exported:
    select = _select(name)
    rows = con.execute(f"SELECT count(*) FROM ({select})").fetchone()[0]
    if has_run and rows:
        target = out / name
        options = "FORMAT PARQUET, PARTITION_BY (run_id)"
    else:
        target = out / f"{name}.parquet"
        options = "FORMAT PARQUET"
    # COPY takes no bound parameter for its target: the path is quoted as a string literal.
    try:
        con.execute(f"COPY ({select}) TO {_literal(str(target))} ({options})")
    except Exception as exc:  # a full or read-only disk midway is one line
        code = disk_errno(exc)
        if code is None:
            raise
        err = disk_error(code, f"write {name} at", target, "Export into a folder you can write.")
        raise DiskError(f"{err} The export in {out} is incomplete: run it again with --overwrite.") from None
    return Exported(name, target, rows, has_run and rows > 0)


def _select(name: str) -> str:
    from warehouse.db import quote_identifier

    if name == PAYLOADS:  # payload rows carry no run_id of their own: take their node's
        return ('SELECT n."run_id", p.* FROM "node_payloads" AS p '
                'JOIN "nodes" AS n USING ("source_id", "line_no")')
    return f"SELECT * FROM {quote_identifier(name)}"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
