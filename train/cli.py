"""`train` command line: thin click commands over the functions of :mod:`train`.

Heavy imports (torch, transformers) stay inside the commands so `train --help` is instant.
"""
from __future__ import annotations

import click

from warehouse.cli import ErrorBoundaryGroup


@click.group(cls=ErrorBoundaryGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Tree-search GRPO trainer that writes its rounds straight into the warehouse."""
    from warehouse.terminal import one_line_warnings

    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    one_line_warnings()  # both trainers: a library's warning is one `Warning:` line


# (module, click command) pairs: each sub-area owns its commands and must import light
# (no torch at import time, so `train --help` stays instant).
_PLUGINS: list[tuple[str, str]] = [
    ("train.env.cli", "env_group"),
    ("train.run_cli", "run_command"),
    ("train.run_cli", "tiny_policy_command"),
    ("train.rm.cli", "rm_command"),
]


def _register_subcommands() -> None:
    import importlib

    for module_name, attr in _PLUGINS:
        main.add_command(getattr(importlib.import_module(module_name), attr))


_register_subcommands()


if __name__ == "__main__":  # python -m train.cli (e.g. under torchrun without the console script)
    main()
