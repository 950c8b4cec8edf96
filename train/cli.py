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
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _register() -> None:
    # Each sub-area owns its commands; importing them must stay light (no torch at import).
    from train.env.cli import env_group

    main.add_command(env_group)


try:
    _register()
except ImportError:  # pragma: no cover - a sub-area not built yet
    pass
