"""Commands run in a private mount namespace over a read-only or a tiny file system.

Tests run as root, which chmod does not stop, so a read-only folder is a read-only bind mount
and a full disk a small tmpfs, each made inside `unshare -m` (`-rm`, a user namespace, when
not root) so the mount is gone when the command ends. Where the machine allows neither, the
tests that need them skip (fail under ROLLOUT_REQUIRE_ISOLATION=1: tests/isolation.py).
"""
from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.isolation import lacking

REPO = Path(__file__).resolve().parent.parent


def _unshare() -> list[str]:
    return ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]


@functools.lru_cache(maxsize=1)
def mounts_work() -> bool:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        try:
            done = subprocess.run([*_unshare(), "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {d}"],
                                  capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return done.returncode == 0


def require_mounts() -> None:
    if not mounts_work():
        lacking("cannot mount a file system in a private namespace on this machine")


def read_only(directory: Path) -> str:
    d = shlex.quote(str(directory))
    return f"mount --bind {d} {d} && mount -o remount,bind,ro {d}"


def tmpfs(directory: Path, size_kb: int) -> str:
    return f"mount -t tmpfs -o size={size_kb}k tmpfs {shlex.quote(str(directory))}"


def run_mounted(setup: str, argv: list[str], timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    """`argv` after the shell `setup` (mounts), in a mount namespace of its own."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", **kw.pop("env", {})}
    return subprocess.run([*_unshare(), "sh", "-c", f'{setup} && exec "$@"', "sh", *argv],
                          capture_output=True, text=True, timeout=timeout, env=env, **kw)


def run_script(script: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """A shell script (mounts and commands) in a mount namespace of its own."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.run([*_unshare(), "sh", "-c", script], capture_output=True, text=True,
                          timeout=timeout, env=env)


def warehouse(*args: str) -> list[str]:
    return [sys.executable, "-m", "warehouse.cli", *args]


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The command failed with exactly one line, `Error: ...`, and no traceback."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    return lines[0]
