"""Errors of the trainer environment, printed by the CLI's one error boundary."""
from __future__ import annotations

from warehouse.errors import TerminalError


class EnvError(TerminalError):
    """A task or an environment request is wrong; retrying will not help."""


class TaskNotFoundError(EnvError):
    """No task directory of that name."""


class TaskLayoutError(EnvError):
    """A task directory lacks a file the environment needs."""
