"""Where nodes' workspaces live, and the sweep that removes those of a process that died.

Every process that runs nodes holds an exclusive ``flock`` on ``<root>/owner-<token>.lock``
for as long as it lives, and names its workspaces ``<root>/node-<token>-*``. The kernel drops
the lock when the process dies, however it dies (kill -9 included), so a lock that can be
taken is a dead owner's: the next process to stage a node under the same root removes that
owner's workspaces, then its lock file. The default root is ``rollout-warehouse-nodes-<uid>``
in the system's temp dir (one per user: another's could not be written), so a killed
``train run``'s workspaces are found by the next one.
"""
from __future__ import annotations

import fcntl
import functools
import os
import secrets
import shutil
import tempfile
from pathlib import Path

DEFAULT_ROOT_NAME = "rollout-warehouse-nodes"


def default_root() -> Path:
    return Path(tempfile.gettempdir()) / f"{DEFAULT_ROOT_NAME}-{os.getuid()}"


def new_workspace(root: str | Path | None) -> Path:
    """A fresh directory for one node under ``root``, after sweeping dead owners' ones there."""
    root = Path(root) if root else default_root()
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    st = os.lstat(root)
    if not os.path.isdir(root) or os.path.islink(root) or st.st_uid != os.getuid():
        # in a shared /tmp another user could have made it first (a link to their own dir)
        raise OSError(f"{root} is not a directory of this user: remove it, or set Limits.workspace_root")
    token = _owner_token(str(root.resolve()))
    sweep(root)
    return Path(tempfile.mkdtemp(prefix=f"node-{token}-", dir=root))


_HELD: dict = {}  # token -> this process's open lock file, held until it exits


@functools.cache
def _owner_token(root: str) -> str:
    """This process's token under ``root``, its lock taken and held."""
    token = secrets.token_hex(6)
    lock = open(Path(root) / f"owner-{token}.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    _HELD[token] = lock
    return token


def sweep(root: str | Path) -> list[Path]:
    """Remove the workspaces of every owner under ``root`` whose lock is free (it died)."""
    root = Path(root)
    removed = []
    for lock_path in root.glob("owner-*.lock"):
        token = lock_path.name[len("owner-"):-len(".lock")]
        if token in _HELD:
            continue
        with open(lock_path, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its owner lives
            for workspace in root.glob(f"node-{token}-*"):
                shutil.rmtree(workspace, ignore_errors=True)
                removed.append(workspace)
            lock_path.unlink(missing_ok=True)
    return removed
