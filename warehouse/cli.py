"""`warehouse` command line: thin click commands over the functions of :mod:`warehouse`.

No logic lives in the callbacks, and nothing heavy is imported at module level so that
`warehouse --help` stays instant (no duckdb, pandas or torch until a command runs).
"""
from __future__ import annotations

import sys
import traceback

import click

from warehouse.config import DATA_PATH_ENV_VAR, DB_ENV_VAR, DEFAULT_MEMORY_LIMIT, MEMORY_ENV_VAR
from warehouse.options import db_option


class ErrorBoundaryGroup(click.Group):
    """The one error boundary: known errors print `Error: ...` and exit non-zero.

    `--debug` (stored on the context object) shows the traceback instead.
    """

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except KeyboardInterrupt:
            click.secho("Interrupted.", fg="red", err=True)
            sys.exit(130)
        except Exception as exc:  # noqa: BLE001 - this is the boundary
            from warehouse.errors import WarehouseError, translate

            err = exc if isinstance(exc, WarehouseError) else translate(exc)
            if (ctx.obj or {}).get("debug") or err is None:
                traceback.print_exc()
                sys.exit(1)
            from warehouse.formatting import visible

            click.secho(f"Error: {visible(str(err), keep=chr(10))}", fg="red", err=True)
            sys.exit(err.exit_code)


pass_db = click.make_pass_decorator(dict)


@click.group(cls=ErrorBoundaryGroup, context_settings={"help_option_names": ["-h", "--help"]})
@db_option(f"Warehouse file or SQLAlchemy URL (duckdb:///path), or a shared DuckLake warehouse: "
           f"ducklake:sqlite:PATH or ducklake:postgres:CONNINFO. Also read from ${DB_ENV_VAR}.")
@click.option(
    "--data-path",
    envvar=DATA_PATH_ENV_VAR,
    metavar="DIR",
    help=f"DuckLake only: where the Parquet files go, given when the catalog is created (init); "
         f"later opens read it from the catalog. Default for a SQLite catalog: PATH.files/ beside "
         f"it. Also read from ${DATA_PATH_ENV_VAR}.",
)
@click.option(
    "--memory-limit",
    envvar=MEMORY_ENV_VAR,
    default=DEFAULT_MEMORY_LIMIT,
    show_default=True,
    metavar="SIZE",
    help=f"The memory budget of every DuckDB connection (e.g. 2GB, 512MB): past it DuckDB spills "
         f"to PATH.tmp beside the file. Keeps a command's process under about 3 GB by default, "
         f"whatever the warehouse holds. Also read from ${MEMORY_ENV_VAR}.",
)
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
@click.pass_context
def main(ctx: click.Context, db: str, data_path: str | None, memory_limit: str, debug: bool) -> None:
    """The rollout warehouse: tree-search GRPO rollouts as one versioned DuckDB database.

    Start with `warehouse init`, load a data root with `warehouse ingest ROOT`, then query
    with `warehouse sql` or any SQL/BI tool.
    """
    from warehouse.config import resolve_db_url, set_memory_limit

    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    set_memory_limit(memory_limit)
    ctx.obj["db_url"] = resolve_db_url(db, data_path)


@main.command()
@click.pass_obj
def init(obj: dict) -> None:
    """Create the warehouse, or upgrade it to the newest schema; (re)apply views and arms."""
    from warehouse.migrate import init_db

    rev = init_db(obj["db_url"])
    click.echo(f"Warehouse ready at schema {rev}: {obj['db_url']}")


@main.command()
@click.argument("revision", default="head")
@click.pass_obj
def upgrade(obj: dict, revision: str) -> None:
    """Upgrade the schema to REVISION (default: head), then reapply views and arms."""
    from warehouse.migrate import upgrade as do_upgrade

    rev = do_upgrade(obj["db_url"], revision)
    click.echo(f"Schema at {rev}.")


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("revision")
@click.pass_obj
def downgrade(obj: dict, revision: str) -> None:
    """Downgrade the schema to REVISION (e.g. `-1`, a revision id, or `base`)."""
    from warehouse.migrate import downgrade as do_downgrade

    rev = do_downgrade(obj["db_url"], revision)
    click.echo(f"Schema at {rev or 'base (empty)'}.")


@main.command()
@click.pass_obj
def version(obj: dict) -> None:
    """Print the package version, the database's schema revision and the newest one."""
    from warehouse.migrate import schema_status

    status = schema_status(obj["db_url"])
    for key, value in status.items():
        click.echo(f"{key}: {value}")


@main.command()
@click.argument("query")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True, help="Output format.")
@click.option("--allow-files", is_flag=True,
              help="Let the query read and write files on this machine (read_csv, COPY ... TO). "
                   "Off by default: a query sees only the warehouse.")
@click.pass_obj
def sql(obj: dict, query: str, fmt: str, allow_files: bool) -> None:
    """Run one SQL QUERY against the warehouse (read-only) and print the result.

    The query reads the warehouse and nothing else: without --allow-files, reading or
    writing the machine's files (read_csv('/etc/hostname'), COPY ... TO) is refused.
    """
    from warehouse.query import run_query
    from warehouse.terminal import render

    result = run_query(obj["db_url"], query, allow_files=allow_files)
    click.echo(render(result, fmt), nl=False)


@main.command()
@click.pass_obj
def tables(obj: dict) -> None:
    """List tables and views with their row counts (on DuckLake, views with their grain only)."""
    from warehouse.config import is_ducklake
    from warehouse.query import LAKE_VIEWS_NOT_COUNTED, list_tables
    from warehouse.terminal import render

    click.echo(render(list_tables(obj["db_url"]), "table"), nl=False)
    if is_ducklake(obj["db_url"]):
        click.echo(LAKE_VIEWS_NOT_COUNTED)


@main.command()
@click.argument("token_id", type=int)
@click.option("--run", "run_id", metavar="RUN", help="Only this run's nodes (default: every run).")
@click.option("--nodes", "nodes_only", is_flag=True,
              help="One row per node holding it, from the token index alone (no token array is read: "
                   "fast across all runs); without it, every occurrence with its position and logprobs.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True, help="Output format.")
@click.pass_obj
def token(obj: dict, token_id: int, run_id: str | None, nodes_only: bool, fmt: str) -> None:
    """Every occurrence of TOKEN_ID in a node's response, across all runs: node_tokens' rows
    for it, found through the token index without unrolling every token array.

    Only the payloads of the nodes holding it are read, a row group (2,048 payloads) at a
    time: an id held all over a large warehouse takes about 0.5 s a row group (a bar on
    stderr tells how far), in one row group's memory. --nodes answers from the index alone."""
    from warehouse.terminal import render
    from warehouse.tokens import search_token, search_token_nodes

    if nodes_only:
        result = search_token_nodes(obj["db_url"], token_id, run_id)
    else:
        with _statement_bar("token") as progress:
            result = search_token(obj["db_url"], token_id, run_id, progress)
    click.echo(render(result, fmt), nl=False)


class _statement_bar:
    """A transient rich bar on stderr for work told as progress(done, total) (a terminal
    only, and only once there are several steps); a no-op callback otherwise."""

    def __init__(self, label: str):
        self.label = label
        self.bar = None

    def __enter__(self):
        from rich.console import Console

        self.console = Console(stderr=True)
        return self.progress

    def progress(self, done: int, total: int) -> None:
        if total < 2 or not self.console.is_terminal:
            return
        if self.bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn(f"[bold]{self.label}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("row groups"), TimeElapsedColumn(), console=self.console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total)
        self.bar.update(self.task, completed=done)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False


@main.command("view-sql")
@click.argument("view")
def view_sql(view: str) -> None:
    """Print VIEW's SELECT (its sql/ file without the CREATE VIEW line), to paste as a BI
    tool's virtual dataset (Superset: SQL Lab, then Save dataset; see docs/bi.md)."""
    from sql import view_body

    click.echo(view_body(view), nl=False)


@main.command("migrate-to")
@click.argument("target", metavar="URL")
@click.option("--target-data-path", metavar="DIR",
              help="Where a new DuckLake target keeps its Parquet files (see --data-path).")
@click.pass_obj
def migrate_to(obj: dict, target: str, target_data_path: str | None) -> None:
    """Copy this warehouse (--db) into the empty warehouse at URL, table by table.

    Works both ways: a DuckDB file into DuckLake (ducklake:sqlite:PATH,
    ducklake:postgres:CONNINFO) and back. The target is created at the newest schema; every
    table's row count is checked against the source, and a copy that does not add up is
    rolled back.
    """
    from warehouse.config import resolve_db_url
    from warehouse.query import Result
    from warehouse.terminal import render
    from warehouse.transfer import migrate_to as do_migrate

    target_url = resolve_db_url(target, target_data_path)
    copied = do_migrate(obj["db_url"], target_url)
    rows = [(c.table, c.source_rows, c.target_rows) for c in copied]
    click.echo(render(Result(["table", "source rows", "copied rows"], rows), "table"), nl=False)
    click.echo(f"Copied {len(copied)} tables into {target_url}; every row count matches.")


@main.command()
@click.option("--older-than", "older_than", default="1h", show_default=True, metavar="AGE",
              help="Only files at least this old (90s, 30m, 1h, 2d): a running writer's files "
                   "are not committed yet and look orphaned. 0 only when no writer runs.")
@click.option("--expire-snapshots", "expire", default=None, metavar="AGE",
              help="First expire the snapshots older than AGE (no time travel to them), so the files "
                   "only they read (deleted or replaced rows) go too; with --older-than 0, now.")
@click.option("--dry-run", is_flag=True, help="List the files (and count the snapshots --expire-snapshots would expire); "
                                             "delete and expire nothing.")
@click.pass_obj
def cleanup(obj: dict, older_than: str, expire: str | None, dry_run: bool) -> None:
    """DuckLake: delete Parquet files no snapshot references.

    Orphans are left by a writer killed during a commit (kill -9, a crash) or stopped by a
    full disk; files replaced by compaction or expired snapshots are deleted too. Both through
    DuckLake's own ducklake_delete_orphaned_files and ducklake_cleanup_old_files. A file whose
    rows were all deleted (the batches' token index files an ingest merges) stays while a
    snapshot reads it: --expire-snapshots lets it go. A DuckDB file has nothing to clean.
    """
    from warehouse.config import is_ducklake
    from warehouse.maintenance import cleanup as do_cleanup, parse_age

    cleaned = do_cleanup(obj["db_url"], parse_age(older_than), dry_run,
                         None if expire is None else parse_age(expire))
    for path in cleaned.paths:
        click.echo(path)
    if not is_ducklake(obj["db_url"]):
        click.echo("A DuckDB file keeps no files outside itself: nothing to clean.")
        return
    verb = "Would delete" if dry_run else "Deleted"
    expired = ""
    if expire is not None:
        expired = f" {'Would expire' if dry_run else 'Expired'} {len(cleaned.expired)} snapshots first."
    click.echo(f"{verb} {len(cleaned.orphaned)} orphaned and {len(cleaned.scheduled)} expired files.{expired}")


@main.command()
@click.pass_obj
def compact(obj: dict) -> None:
    """Rewrite the DuckDB file without its free blocks (reports the size before and after);
    on DuckLake, merge each table's small Parquet files (reports the files before and after).

    The file: copies every table and view into a new file under the write lock and renames it
    over the old one; readers attached meanwhile keep reading what they opened. DuckLake: every
    commit writes a file per table it touches and every query opens each one, so pages slow as
    commits add up; a table a commit, readers keep their snapshot, the replaced files stay
    until 'warehouse cleanup'. node_payloads is merged into files of 32 MB on one thread (merging
    token arrays holds an output file in memory; a merge that runs out of memory is rolled
    back and named); node_token_index is left as written.
    """
    from warehouse.maintenance import Merged
    from warehouse.maintenance import compact as do_compact

    done = do_compact(obj["db_url"])
    if isinstance(done, Merged):
        click.echo(f"Merged the data files of {done.tables} tables: {done.files_before:,} files -> "
                   f"{done.files_after:,} ({', '.join(done.left)} left as written). "
                   "'warehouse cleanup' deletes the replaced files once they are past its --older-than.")
        return
    click.echo(f"Compacted {done.path}: {done.bytes_before / 1e6:.1f} MB -> {done.bytes_after / 1e6:.1f} MB.")


def _register_subcommands() -> None:
    """Commands owned by other areas register here (ingest, metrics, check, ...)."""
    import importlib

    for module_name, attr in _PLUGINS:
        module = importlib.import_module(module_name)
        main.add_command(getattr(module, attr))


# (module, click command) pairs; each module must import light.
_PLUGINS: list[tuple[str, str]] = [
    ("warehouse.metrics_cli", "metrics"), ("warehouse.metrics_cli", "report"), ("warehouse.metrics_cli", "export"),
    ("warehouse.quality.cli", "check"),
    ("warehouse.serve.cli", "serve"),
    ("ingest.cli", "ingest"), ("ingest.cli", "sample"), ("ingest.cli", "demo"),
]

_register_subcommands()


if __name__ == "__main__":  # python -m warehouse.cli (e.g. under torchrun without the console script)
    main()
