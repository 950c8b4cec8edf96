"""The flags several command lines share are declared once (warehouse.options): every command
that takes `--db` or `--tasks-root` takes it the same way, and no module declares it again."""
from __future__ import annotations

import ast
from pathlib import Path

import click

from train.cli import main as train_main
from warehouse.cli import main as warehouse_main
from warehouse.config import DB_ENV_VAR, DEFAULT_DB_FILE, TASKS_ROOT_ENV

ROOT = Path(__file__).resolve().parents[2]
SHARED = ("--db", "--tasks-root")


def _commands(command: click.Command, path: str):
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, f"{path} {name}")


def _options(flag: str) -> dict[str, click.Option]:
    return {path: p for root, name in ((warehouse_main, "warehouse"), (train_main, "train"))
            for path, cmd in _commands(root, name) for p in cmd.params if isinstance(p, click.Option) and flag in p.opts}


def test_every_db_flag_reads_the_same_variable_and_default():
    found = _options("--db")
    assert {"warehouse", "train run", "train rm"} <= set(found)
    assert {(p.name, p.envvar, p.default, p.metavar) for p in found.values()} == {
        ("db", DB_ENV_VAR, DEFAULT_DB_FILE, "URL|PATH")}


def test_every_tasks_root_flag_is_the_same_and_names_its_variable():
    found = _options("--tasks-root")
    assert {"train run", "train env check", "train env tasks"} <= set(found)
    assert len({(p.name, p.default, p.metavar, p.help) for p in found.values()}) == 1
    assert all(f"${TASKS_ROOT_ENV}" in p.help for p in found.values())


def _declared_flags(path: Path) -> list[str]:
    """`click.option("--db", ...)` and the like, outside the options module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("option") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and first.value in SHARED:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_module_declares_a_shared_flag_again():
    options = ROOT / "warehouse" / "options.py"
    assert _declared_flags(options)  # the check sees a declaration where there is one
    assert [hit for pkg in ("warehouse", "ingest", "train") for p in sorted((ROOT / pkg).rglob("*.py"))
            if p != options for hit in _declared_flags(p)] == []
