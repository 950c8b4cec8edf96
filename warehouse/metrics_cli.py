"""`warehouse metrics`, `warehouse report`, `warehouse export`: thin commands over
:mod:`warehouse.metrics`, :mod:`warehouse.report` and :mod:`warehouse.export`.

Imports stay inside the callbacks so `warehouse --help` never loads duckdb or matplotlib.
"""
from __future__ import annotations

from pathlib import Path

import click

from warehouse.metrics import DEFAULT_VIEW, VIEW_KEYS  # light: no duckdb at import


@click.command()
@click.option("--run", "run_id", metavar="RUN", help="Only this run (its directory name).")
@click.option("--task", metavar="TASK", help="Only this task (competition slug).")
@click.option("--view", type=click.Choice(list(VIEW_KEYS)), default=DEFAULT_VIEW,
              show_default=True,
              help="Which metric view: task_round_metrics (per run, round, task), round_metrics "
                   "(per run round, with its step's timing), round_task_means (per run round, the "
                   "mean over its tasks: the compare page's values), run_metrics, run_status_counts, "
                   "decision_rule, invariant_violations; for reward-model runs the rm_* views "
                   "(docs/reward_model.md).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True, help="Output format. csv and json keep every column.")
@click.option("--columns", metavar="A,B,...",
              help="Only these columns, in this order (any format).")
@click.option("--all", "all_columns", is_flag=True,
              help="Every column of the view in the table (the default table shows key columns).")
@click.pass_obj
def metrics(obj: dict, run_id: str | None, task: str | None, view: str, fmt: str,
            columns: str | None, all_columns: bool) -> None:
    """Print a report metric view (docs/metrics.md), optionally for one run and/or task.

    The default view is task_round_metrics, one row per (run, round, task); --task
    applies to the views with a task column. The table shows each view's key columns, one
    table per run, sized to the terminal ($COLUMNS); a single run's run_metrics reads as a
    key/value list. --columns picks columns, --all shows every one.
    """
    from warehouse.metrics import metrics as read_metrics
    from warehouse.terminal import metrics_table, render, select_columns

    if columns and all_columns:
        raise click.UsageError("--columns and --all exclude each other.")
    picked = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    result = read_metrics(obj["db_url"], view=view, run=run_id, task=task)
    if fmt == "table":
        click.echo(metrics_table(view, result, picked, all_columns), nl=False)
    else:
        click.echo(render(select_columns(result, picked) if picked else result, fmt), nl=False)


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for index.html and its PNGs (created if missing).")
@click.pass_obj
def report(obj: dict, run_id: str, out_dir: str) -> None:
    """Write an HTML report with PNG dashboards per task for RUN.

    For a reward-model run (data root 004): the score-by-progress plot (proxy and final, error
    bars, the reference as a line), the section table, budget use and training jobs.
    """
    from warehouse.report import write_report

    index = write_report(obj["db_url"], run_id, out_dir)
    click.echo(f"Wrote {index}")


@click.command()
@click.argument("out_dir", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--payloads/--no-payloads", default=True, show_default=True,
              help="Export node_payloads (prompts, completions, token ids: the large table). "
                   "Without them the export cannot restore the warehouse whole.")
@click.option("--overwrite", is_flag=True, help="Replace an earlier export in DIR.")
@click.pass_obj
def export(obj: dict, out_dir: str, payloads: bool, overwrite: bool) -> None:
    """Export every table and view as Parquet under DIR, partitioned by run_id, with a
    manifest (DIR/export_manifest.json): 'warehouse --db NEW ingest DIR' restores the
    warehouse from it into an empty NEW (after 'warehouse --db NEW init')."""
    from warehouse.export import MANIFEST, export_parquet

    for item in export_parquet(obj["db_url"], out_dir, payloads=payloads, overwrite=overwrite):
        layout = "partitioned by run_id" if item.partitioned else "one file"
        click.echo(f"{item.relation}: {item.rows} rows -> {item.path} ({layout})")
    click.echo(f"Manifest: {Path(out_dir) / MANIFEST}. Restore it into a fresh warehouse with: "
               f"warehouse --db NEW init && warehouse --db NEW ingest {out_dir}")
