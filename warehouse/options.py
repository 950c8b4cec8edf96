"""The flags several command lines share, declared once: `--db` (the `warehouse` group, `train
run`, `train rm`) and `--tasks-root` (`train run`, `train env check`, `train env tasks`). Each
command's help says what the warehouse is for there; the rest of the flag is the same everywhere.
"""
from __future__ import annotations

import click

from warehouse.config import DB_ENV_VAR, DEFAULT_DB_FILE, TASKS_ROOT_ENV


def db_option(help: str):
    """`--db URL|PATH`, else $ROLLOUT_WAREHOUSE_DB, else ./warehouse.duckdb."""
    return click.option("--db", "db", envvar=DB_ENV_VAR, default=DEFAULT_DB_FILE, show_default=True,
                        metavar="URL|PATH", help=help)


def tasks_root_option():
    """`--tasks-root DIR`: the MLE-bench-layout task folders (None: train.env.tasks decides)."""
    return click.option("--tasks-root", type=click.Path(file_okay=False), default=None, metavar="DIR",
                        help=f"Directory of MLE-bench-layout task folders (default: ${TASKS_ROOT_ENV}, "
                             "else the bundled tasks).")
