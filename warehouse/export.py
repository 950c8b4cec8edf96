"""Export the warehouse as Parquet, partitioned by run, and restore a warehouse from it.

Layout: `DIR/<relation>/run_id=<run>/data_0.parquet` for every table and view with a
`run_id` column (Hive partitioning, which Spark, Trino and DuckDB read as a column; the files
keep `run_id` too, so a NULL or numeric-looking run id reads back exactly), and
`DIR/<relation>.parquet` for the few without one (arms, questions, sources...) and for an
empty relation (a partitioned write of no rows writes no file). `node_payloads` (prompts,
completions, token ids: the heavy table) are written run by run (its node's run), at most
PAYLOADS_PER_FILE payloads a file (`data_0.parquet`, `data_1.parquet`, ...), so memory holds
that many payloads at a time whatever a run or the warehouse holds; they
are left out only when asked (`payloads=False`). Views derived from the payloads
(`node_tokens`: every token unrolled, the payloads again at many times their size) and the
token index are left out always: the restored warehouse derives them again.

`DIR/export_manifest.json` lists every relation (table or view), its file(s), row count and
columns, and the schema revision. `warehouse ingest DIR` on an empty warehouse at that revision
restores every table from it (:func:`restore_export`) in one transaction, row counts checked
against the manifest: the restored warehouse equals the exported one, table by table.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from warehouse.errors import DiskError, TerminalError, disk_errno, disk_error, probe_writable

PAYLOADS = "node_payloads"
#: Derived from the payloads: never exported (the manifest lists them as left out). The view
#: unrolls them; the token index (warehouse/tokens.py) is built again by the restore.
DERIVED = ("node_tokens", "node_token_index", "node_token_index_writes")
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # Hive's folder for a NULL partition value
MANIFEST = "export_manifest.json"
FORMAT = 1  # the manifest's layout version
#: Alembic's bookkeeping is not data: the target's own is written by its `init`.
SKIPPED = {"alembic_version"}
#: Written by `init` too: a restore replaces them with the export's rows.
CATALOG = ("arms", "questions")


@dataclass
class Exported:
    relation: str
    path: Path
    rows: int
    partitioned: bool
    kind: str = "table"  # table | view


def export_parquet(url: str, out_dir: str | Path, payloads: bool = True,
                   overwrite: bool = False) -> list[Exported]:
    """Write every table and view of the warehouse under `out_dir` as Parquet, and the
    manifest that `warehouse ingest` restores it from."""
    from warehouse.db import connect
    from warehouse.revision import head_revision, require_head

    out = Path(out_dir)
    with connect(url, read_only=True) as con:
        require_head(con, url)
        relations = _relations(con, payloads)
        _prepare(out, [name for name, _, _ in relations], overwrite)
        done = [_export_one(con, name, kind, has_run, out) for name, kind, has_run in relations]
        columns = {e.relation: _columns(con, e.relation) for e in done}
    _write_manifest(out, done, columns, head_revision(), left_out=([] if payloads else [PAYLOADS]) + list(DERIVED))
    return done


def _relations(con, payloads: bool) -> list[tuple[str, str, bool]]:
    """(name, table | view, has a run_id column) for every table and view in the main schema."""
    rows = con.execute(
        "SELECT t.table_name, any_value(t.table_type), bool_or(c.column_name = 'run_id') "
        "FROM information_schema.tables AS t "
        "JOIN information_schema.columns AS c USING (table_catalog, table_schema, table_name) "
        "WHERE t.table_schema = 'main' AND t.table_catalog = current_database() "
        "GROUP BY t.table_name ORDER BY t.table_name"
    ).fetchall()
    keep = [(n, "view" if kind == "VIEW" else "table", bool(r)) for n, kind, r in rows
            if n not in SKIPPED and n not in DERIVED]
    if payloads:
        return [(n, k, True if n == PAYLOADS else r) for n, k, r in keep]
    return [(n, k, r) for n, k, r in keep if n != PAYLOADS]


def _prepare(out: Path, names: list[str], overwrite: bool) -> None:
    targets = [p for n in names for p in (out / n, out / f"{n}.parquet") if p.exists()]
    targets += [out / MANIFEST] if (out / MANIFEST).exists() else []
    if targets and not overwrite:
        raise TerminalError(
            f"{targets[0]} already exists. Pass --overwrite to replace the export in {out}."
        )
    probe_writable(out, "write the export into", "Export into a folder you can write.")
    for path in targets:
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def _export_one(con, name: str, kind: str, has_run: bool, out: Path) -> Exported:
    if name == PAYLOADS:
        return _export_payloads(con, out)
    select = _select(name)
    rows = con.execute(f"SELECT count(*) FROM ({select})").fetchone()[0]
    if has_run and rows:
        target = out / name
        options = "FORMAT PARQUET, PARTITION_BY (run_id), WRITE_PARTITION_COLUMNS true"
    else:
        target = out / f"{name}.parquet"
        options = "FORMAT PARQUET"
    _copy(con, select, [], target, options, name, out)
    return Exported(name, target, rows, has_run and rows > 0, kind)


def _copy(con, select: str, params: list, target: Path, options: str, name: str, out: Path) -> None:
    # COPY takes no bound parameter for its target: the path is quoted as a string literal.
    try:
        con.execute(f"COPY ({select}) TO {_literal(str(target))} ({options})", params)
    except Exception as exc:  # a full or read-only disk midway is one line
        code = disk_errno(exc)
        if code is None:
            raise
        err = disk_error(code, f"write {name} at", target, "Export into a folder you can write.")
        raise DiskError(f"{err} The export in {out} is incomplete: run it again with --overwrite.") from None


#: Payloads one COPY writes (one file, `data_<i>.parquet`): the Parquet writer holds its rows
#: until a row group is full, and one COPY of a run's 4,800 payloads of ~18 K tokens ran a
#: 1.8 GiB budget out. A node file's payloads stay in one file, however many.
PAYLOADS_PER_FILE = 256


def _export_payloads(con, out: Path) -> Exported:
    """node_payloads run by run (`run_id=<run>/data_<i>.parquet`, PAYLOADS_PER_FILE payloads a
    file), plus the payloads no node row claims (run_id NULL, in Hive's folder for NULL). One run's COPY reads only the
    row groups of that run's sources: its source ids bound the scan, and zone maps skip the rest."""
    from urllib.parse import quote

    rows = con.execute(f"SELECT count(*) FROM {PAYLOADS}").fetchone()[0]
    target = out / PAYLOADS
    if not rows:
        target = out / f"{PAYLOADS}.parquet"
        _copy(con, _select(PAYLOADS), [], target, "FORMAT PARQUET", PAYLOADS, out)
        return Exported(PAYLOADS, target, 0, False)
    per_source = con.execute('SELECT "run_id", "source_id", count(*) FROM "nodes" '
                             'GROUP BY "run_id", "source_id" ORDER BY "run_id", "source_id"').fetchall()
    select = ('SELECT n."run_id", p.* FROM "node_payloads" AS p JOIN "nodes" AS n USING ("source_id", "line_no") '
              'WHERE n."run_id" = ? AND p."source_id" BETWEEN ? AND ?')
    for run_id, chunks in _chunks_by_run(per_source):
        folder = target / f"run_id={quote(run_id, safe='')}"  # nodes.run_id is never NULL
        folder.mkdir(parents=True, exist_ok=True)
        for i, (low, high) in enumerate(chunks):
            _copy(con, select, [run_id, low, high], folder / f"data_{i}.parquet", "FORMAT PARQUET", PAYLOADS, out)
    orphans = ('FROM "node_payloads" AS p ANTI JOIN "nodes" AS n USING ("source_id", "line_no")')
    if con.execute(f"SELECT count(*) {orphans}").fetchone()[0]:
        folder = target / f"run_id={NULL_PARTITION}"
        folder.mkdir(parents=True, exist_ok=True)
        _copy(con, f'SELECT CAST(NULL AS VARCHAR) AS "run_id", p.* {orphans}', [], folder / "data_0.parquet",
              "FORMAT PARQUET", PAYLOADS, out)
    return Exported(PAYLOADS, target, rows, True)


def _chunks_by_run(per_source: list[tuple[str, int, int]]):
    """(run_id, [(low source_id, high source_id), ...]) from (run_id, source_id, nodes) rows in
    that order: consecutive sources of a run, up to PAYLOADS_PER_FILE nodes a chunk (or one source)."""
    from itertools import groupby

    for run_id, rows in groupby(per_source, key=lambda row: row[0]):
        chunks, count = [], 0
        for _, source_id, n in rows:
            if chunks and count + n <= PAYLOADS_PER_FILE:
                chunks[-1][1], count = source_id, count + n
            else:
                chunks.append([source_id, source_id])
                count = n
        yield run_id, [tuple(c) for c in chunks]


def _select(name: str) -> str:
    from warehouse.db import quote_identifier

    if name == PAYLOADS:  # payload rows carry no run_id of their own: take their node's
        return ('SELECT n."run_id", p.* FROM "node_payloads" AS p '
                'LEFT JOIN "nodes" AS n USING ("source_id", "line_no")')
    return f"SELECT * FROM {quote_identifier(name)}"


def _columns(con, name: str) -> list[list[str]]:
    """(name, type) of each column the files hold (payloads: their node's run_id first)."""
    return [[d[0], str(d[1])] for d in con.execute(f"DESCRIBE {_select(name)}").fetchall()]


def _write_manifest(out: Path, done: list[Exported], columns: dict, revision: str,
                    left_out: list[str]) -> None:
    doc = {"format": FORMAT, "schema_revision": revision,
           "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "left_out": left_out,
           "relations": [{"name": e.relation, "kind": e.kind, "rows": e.rows,
                          "path": e.path.relative_to(out).as_posix(), "partitioned": e.partitioned,
                          "columns": columns[e.relation]} for e in done]}
    (out / MANIFEST).write_text(json.dumps(doc, indent=1) + "\n")


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# --- restore -----------------------------------------------------------------------------------

@dataclass
class Restored:
    table: str
    rows: int


def is_export(path: str | Path) -> bool:
    """Whether `path` is a directory `export_parquet` wrote (it holds the manifest)."""
    return (Path(path) / MANIFEST).is_file()


def restore_export(url: str, export_dir: str | Path) -> tuple[list[Restored], list[str]]:
    """Load every table of the export into the (empty) warehouse at `url`, in one transaction.

    Returns the tables restored and the warnings (tables the export left out). Refuses, with
    nothing written, a warehouse that already holds run data, an export of another schema
    revision, and an export whose files do not hold the manifest's row counts.
    """
    from warehouse.config import display_name
    from warehouse.db import connect, transaction
    from warehouse.revision import require_head

    root = Path(export_dir)
    doc = read_manifest(root)
    tables = [r for r in doc["relations"] if r["kind"] == "table" and r["name"] not in SKIPPED]
    with connect(url) as con:
        require_head(con, url)
        _refuse_other_revision(doc, root)
        _refuse_data(con, display_name(url), root)
        restored = transaction(con, lambda: _restore_all(con, root, tables))
    warnings = [f"{root} was exported without {name}: the restored warehouse has none"
                for name in doc.get("left_out", []) if name not in DERIVED]
    return restored, warnings


def read_manifest(root: Path) -> dict:
    path = root / MANIFEST
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise TerminalError(f"{path}: not a readable export manifest ({exc}).") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("relations"), list):
        raise TerminalError(f"{path}: not an export manifest of format {FORMAT}; export again with "
                            "this version's 'warehouse export'.")
    return doc


def _refuse_other_revision(doc: dict, root: Path) -> None:
    from warehouse.revision import head_revision

    head = head_revision()
    if doc.get("schema_revision") != head:
        raise TerminalError(f"{root} was exported at schema {doc.get('schema_revision')}, this version's is "
                            f"{head}: restore it with the version that exported it, then run "
                            "'warehouse upgrade'.")


def _refuse_data(con, name: str, root: Path) -> None:
    from warehouse.schema import TABLE_NAMES

    full = [t for t in TABLE_NAMES if t not in CATALOG
            and con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]]
    if full:
        raise TerminalError(f"{name} already holds data ({', '.join(full[:4])}): an export restores into "
                            f"an empty warehouse only. Run 'warehouse --db NEW init', then ingest {root} there.")


def _restore_all(con, root: Path, tables: list[dict]) -> list[Restored]:
    from warehouse.tokens import rebuild_index

    restored = [_restore_one(con, root, r) for r in tables]
    rebuild_index(con)
    return restored


def _restore_one(con, root: Path, relation: dict) -> Restored:
    from warehouse.db import quote_identifier as qi

    name = relation["name"]
    cols = [c for (c,) in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND table_name = ? ORDER BY column_index", [name]).fetchall()]
    names = ", ".join(qi(c) for c in cols)
    files = str(root / relation["path"] / "*" / "*.parquet") if relation["partitioned"] \
        else str(root / relation["path"])
    if name in CATALOG:
        con.execute(f"DELETE FROM {qi(name)}")
    con.execute(f"INSERT INTO {qi(name)} ({names}) SELECT {names} "
                "FROM read_parquet(?, hive_partitioning = false)", [files])
    rows = con.execute(f"SELECT count(*) FROM {qi(name)}").fetchone()[0]
    if rows != relation["rows"]:
        raise TerminalError(f"{name}: the export's manifest lists {relation['rows']} rows, its files hold "
                            f"{rows}; nothing was restored. Export again.")
    return Restored(name, rows)
