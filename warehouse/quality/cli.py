"""`warehouse check`: the data-quality gate (imports nothing heavy until it runs)."""
from __future__ import annotations

import sys

import click

from warehouse.quality.suites import SUITES


@click.command("check")
@click.option("--run", "run", metavar="RUN", help="Check only this run (its run directory's name).")
@click.option("--suite", type=click.Choice(list(SUITES)), help="Run only this suite.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="Output format.")
@click.option("--docs", "docs_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Also write Great Expectations Data Docs (HTML) into DIR.")
@click.pass_obj
def check(obj: dict, run: str | None, suite: str | None, fmt: str, docs_dir: str | None) -> None:
    """Run the data-quality gate: docs/metrics.md's invariants 1-9 as Great Expectations suites.

    Prints each expectation with pass/fail, its offending row count and up to five examples
    (run, round, task, node id). Exits 1 when any expectation fails.
    """
    from warehouse.quality.report import render_report
    from warehouse.quality.runner import run_checks

    report = run_checks(obj["db_url"], run=run, suite=suite, docs_dir=docs_dir)
    click.echo(render_report(report, fmt), nl=False)
    if not report.success:
        sys.exit(1)
