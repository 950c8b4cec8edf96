"""`warehouse ingest`, `warehouse sample`, `warehouse demo`: thin commands over `ingest`.

Imports stay light at module level (click only): `warehouse --help` must not load duckdb.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time

import click

from ingest.lines import MAX_LINE_BYTES  # light: no duckdb, numpy or pyarrow at import

MAX_PRINTED_ERRORS = 20


@click.command()
@click.argument("roots", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--manifest", "manifests", multiple=True, type=click.Path(dir_okay=False),
              help="TOML file of run metadata (arm, kind, lineage, W&B name) that adds to or "
                   "overrides the shipped manifests. Repeatable; later files win.")
@click.option("--quiet", "-q", is_flag=True,
              help="Scripts: no progress bar, warnings or summary; rejections still print.")
@click.option("--max-line-mb", type=float, default=MAX_LINE_BYTES / 2**20, show_default=True,
              help="Reject a single JSONL line larger than this (bounds memory: a line takes "
                   "a few times its size while it is parsed).")
@click.pass_obj
def ingest(obj: dict, roots: tuple[str, ...], manifests: tuple[str, ...], quiet: bool,
           max_line_mb: float) -> None:
    """Load data ROOTs (run directories of node JSONL, summaries, timing) into the warehouse.

    Incremental: unchanged files are skipped, changed files replace their rows. Exit code 0
    when every row landed, 3 when some lines or files were rejected (see the ingest_errors
    table), 1 on a real failure. A ROOT written by 'warehouse export' (it holds
    export_manifest.json) restores every table of the exported warehouse into this one, which
    must be empty.
    """
    from ingest.pipeline import ingest_roots
    from warehouse.export import is_export

    exports = [root for root in roots if is_export(root)]
    for root in exports:
        _restore(obj["db_url"], root, quiet)
    roots = tuple(root for root in roots if root not in exports)
    if not roots:
        return
    started = time.monotonic()
    with _progress(quiet) as on_file:
        report = ingest_roots(obj["db_url"], list(roots), manifests, progress=on_file,
                              max_line_bytes=int(max_line_mb * 1024 * 1024))
    _print_report(report, time.monotonic() - started, quiet)
    sys.exit(report.exit_code)


def _restore(db_url: str, root: str, quiet: bool) -> None:
    """Restore an export; a warehouse file that is not there yet is created for it (as the
    README's `warehouse --db copy.duckdb ingest parquet/`), and removed again when the
    restore fails, so a failed command leaves nothing behind."""
    from warehouse.export import restore_export

    created = _new_warehouse_file(db_url)
    try:
        if created is not None:
            from warehouse.migrate import init_db

            init_db(db_url)
        restored, warnings = restore_export(db_url, root)
    except BaseException:
        for path in [] if created is None else [created, created + ".wal"]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        raise
    for warning in [] if quiet else warnings:
        click.secho(f"Warning: {warning}", fg="yellow", err=True)
    if not quiet:
        click.echo(f"Restored {len(restored)} tables, {sum(r.rows for r in restored):,} rows, from {root}")


def _new_warehouse_file(db_url: str) -> str | None:
    """The file of a `duckdb:///PATH` warehouse that does not exist yet, else None."""
    from warehouse.config import db_path_from_url, is_ducklake

    if is_ducklake(db_url):
        return None
    path = db_path_from_url(db_url)
    return None if path == ":memory:" or os.path.exists(path) else path


@click.command()
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
def sample(out: str, seed: int) -> None:
    """Write a small synthetic data root to OUT in every documented shape (data roots 000, 002),
    plus data root 004's reward-model run (docs/reward_model.md)."""
    from ingest.sample import write_sample_root

    root = write_sample_root(out, seed=seed)
    click.echo(f"Sample data root written to {root}. Load it with: warehouse ingest {root}")


@click.command()
@click.option("--out", type=click.Path(file_okay=False), default="demo_root", show_default=True,
              help="Where to write the sample data root.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary.")
@click.pass_obj
def demo(obj: dict, out: str, seed: int, quiet: bool) -> None:
    """Build a warehouse from the synthetic sample: init, write the sample, ingest it."""
    from ingest.pipeline import build_demo

    started = time.monotonic()
    with _progress(quiet) as on_file:
        report = build_demo(obj["db_url"], out, seed=seed, progress=on_file)
    _print_report(report, time.monotonic() - started, quiet)
    if not quiet:
        from warehouse.terminal import fit_command

        click.echo("Try:")
        click.echo(fit_command(["warehouse", "--db", obj["db_url"], "sql",
                                '"SELECT run_id, kind, arm, lost FROM runs"']))
    sys.exit(report.exit_code)


class _progress:
    """A rich progress bar (files, rows, MB/s) on a terminal; a no-op callback otherwise."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.bar = None

    def __enter__(self):
        from rich.console import Console

        console = Console(stderr=True)
        if self.quiet or not console.is_terminal:
            return None
        from rich.progress import (BarColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TransferSpeedColumn)

        self.bar = Progress(TextColumn("[bold]ingest"), BarColumn(),
                            TextColumn("{task.fields[files]} files"),
                            TextColumn("{task.fields[rows]:,} rows"), TransferSpeedColumn(),
                            TimeElapsedColumn(), console=console, transient=True)
        self.bar.start()
        self.task = self.bar.add_task("ingest", total=None, files=0, rows=0)
        self.files = self.rows = 0
        return self.on_file

    def on_file(self, job, n_bytes: int, rows: int) -> None:
        if job is None:  # the start: total bytes of the roots
            self.bar.update(self.task, total=n_bytes)
            return
        self.files += 1
        self.rows += rows
        self.bar.update(self.task, advance=n_bytes, files=self.files, rows=self.rows)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False


def _print_report(report, seconds: float, quiet: bool) -> None:
    """Warnings and the summary unless quiet; rejections always (one line each, on stderr)."""
    for warning in [] if quiet else report.warnings:
        click.secho(f"Warning: {warning}", fg="yellow", err=True)
    for error in report.errors[:MAX_PRINTED_ERRORS]:
        click.secho(f"Rejected: {error}", fg="red", err=True)
    if len(report.errors) > MAX_PRINTED_ERRORS:
        click.secho(f"... and {len(report.errors) - MAX_PRINTED_ERRORS} more; all are in the "
                    "ingest_errors table", fg="red", err=True)
    if quiet:
        return
    mb = report.bytes_read / 1e6
    click.echo(
        f"{report.runs} runs, {report.files_total} files: {report.files_loaded} loaded, "
        f"{report.files_skipped} unchanged, {report.files_failed} failed"
        + (f", {report.entries_skipped} skipped (see the warnings)" if report.entries_skipped else "")
        + f"; {report.rows:,} rows "
        f"landed, {report.rows_rejected:,} rejected; {mb:.1f} MB in {seconds:.1f} s "
        f"({mb / max(seconds, 1e-9):.1f} MB/s)")
