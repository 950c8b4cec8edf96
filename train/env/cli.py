"""`train env`: thin commands over :mod:`train.env` (a researcher's view of one task)."""
from __future__ import annotations

import json
from pathlib import Path

import click

from warehouse.options import tasks_root_option


@click.group(name="env")
def env_group() -> None:
    """Tasks, sandboxed execution and grading: the trainer's environment."""


@env_group.command("check")
@click.argument("task")
@click.option("--code", "code_file", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The solution: a Python script, or a completion with a ```python fence.")
@tasks_root_option()
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Wall-clock limit in seconds.")
@click.option("--exec-gpus", default="none", show_default=True, metavar="0,1|none",
              help="GPUs a solution that declares gpu = N in [tool.resources] may use.")
@click.option("--unsafe-no-sandbox", is_flag=True,
              help="Run the solution even where bubblewrap cannot sandbox it: it can then read every "
                   "file on this machine but the tasks root. Without bubblewrap the check refuses.")
@click.option("--format", "fmt", type=click.Choice(["json", "pretty"]), default="pretty", show_default=True)
def check(task: str, code_file: Path, tasks_root: str | None, timeout: float, exec_gpus: str,
          unsafe_no_sandbox: bool, fmt: str) -> None:
    """Run one solution through the whole path and print its node record.

    The solution runs in the bubblewrap sandbox (apt-get install bubblewrap); without it the
    check refuses, unless --unsafe-no-sandbox."""
    from train.env.gpu import parse_exec_gpus
    from train.env.node import check_solution

    record = check_solution(task, code_file.read_text(), tasks_root=tasks_root, timeout_s=timeout,
                            gpus=parse_exec_gpus(exec_gpus) or [], unsafe_no_sandbox=unsafe_no_sandbox)
    if fmt == "json":
        click.echo(json.dumps(record, indent=2, default=str))
    else:
        _print_pretty(record)


@env_group.command("tasks")
@tasks_root_option()
@click.option("--format", "fmt", type=click.Choice(["tsv", "json"]), default="tsv", show_default=True,
              help="Tab-separated lines with a header, or a JSON list of rows.")
def tasks(tasks_root: str | None, fmt: str) -> None:
    """List every task under the tasks root: metric, direction, id column, targets and
    leaderboard size. A task that cannot be read is listed with the reason, and the listing
    goes on; the command then exits 1."""
    from train.env.tasks import describe_tasks
    from warehouse.formatting import visible

    rows = describe_tasks(tasks_root)
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
    else:
        click.echo("task\tmetric\tdirection\tid_column\ttargets\tteams")
        for row in rows:
            if row["error"]:
                click.echo(visible(f"{row['task']}\tunreadable: {row['error']}", keep="\t"))
            else:
                click.echo("\t".join(visible(str(row[k])) for k in ("task", "metric", "direction", "id_column", "targets", "teams")))
    if any(row["error"] for row in rows):
        raise SystemExit(1)


def _print_pretty(record: dict) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from warehouse.formatting import visible

    # every value is text, not markup, and its control characters print as escapes
    table = Table(show_header=False, box=None)
    for key, value in record.items():
        if key in ("code", "term_tail"):
            continue
        table.add_row(Text(visible(str(key)), style="bold"), Text(visible(json.dumps(value, default=str))))
    console = Console()
    console.print(table)
    if record.get("term_tail"):
        console.rule("term_tail")
        console.print(Text(visible(record["term_tail"], keep="\n\t")), highlight=False)
