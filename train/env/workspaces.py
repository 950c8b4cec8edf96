"""Where nodes' workspaces live, and the sweep that removes those of a process that died.

Every process that runs nodes holds an exclusive ``flock`` on ``<root>/owner-<token>.lock``
for as long as it lives, and names its workspaces ``<root>/node-<token>-*``. The kernel drops
the lock when the process dies, however it dies (kill -9 included), so a lock that can be
taken is a dead owner's: the next process to stage a node under the same root removes that
owner's workspaces, then its lock file. The default root is ``rollout-warehouse-nodes-<uid>``
in the system's temp dir (one per user: another's could not be written), so a killed
``train run``'s workspaces are found by the next one.

A workspace is the node's: whatever tree it left (any depth, any name, no permissions, links,
FIFOs, sockets) is removed by ``remove_tree``, which never follows a link, never recurses and
never builds a path longer than two names; files are read out of it by ``read_beneath``, which
follows no link at any component and opens regular files only.
"""
from __future__ import annotations

import errno
import fcntl
import functools
import logging
import os
import secrets
import stat
import tempfile
import threading
from pathlib import Path

log = logging.getLogger(__name__)

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
_TOKEN_LOCK = threading.Lock()  # the first nodes of a process stage on several threads at once


def _owner_token(root: str) -> str:
    """This process's token under ``root``, its lock taken and held.

    The lock file is locked under a name the sweep does not read and only then renamed to
    ``owner-<token>.lock``: a sweep (another process's, or this one's on another thread) that
    found the file before its owner locked it would take the lock itself, call the owner dead
    and leave the owner's ``flock`` failing with EAGAIN."""
    with _TOKEN_LOCK:
        return _owner_token_locked(root)


@functools.cache
def _owner_token_locked(root: str) -> str:
    token = secrets.token_hex(6)
    pending = Path(root) / f".pending-{token}.lock"
    lock = open(pending, "w")
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a name no one else knows: never refused
    os.rename(pending, Path(root) / f"owner-{token}.lock")
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
            left = 0
            for workspace in root.glob(f"node-{token}-*"):
                try:
                    remove_tree(workspace)
                    removed.append(workspace)
                except OSError as exc:  # never blocks this node: logged, tried again by the next
                    left += 1
                    log.warning("cannot remove a dead run's workspace %s: %s", workspace, exc)
            if not left:
                lock_path.unlink(missing_ok=True)
    return removed


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: str | Path) -> None:
    """Remove ``path`` and everything under it, whatever a node built there; raises OSError
    for what cannot be removed.

    Without recursion and without long paths: every directory met is first renamed to the
    top of the tree (``path`` itself), so no directory is ever more than one level below it
    and two descriptors are open at a time. Links are unlinked, never followed; a directory
    without permissions is given them (chmod through a descriptor, not a path)."""
    path = Path(path)
    try:
        parent = os.open(path.parent, _DIR)
    except FileNotFoundError:
        return
    try:
        try:
            st = os.stat(path.name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(path.name, dir_fd=parent)
            return
        top = _open_dir(parent, path.name)
        try:
            _flatten_and_remove(top)
        finally:
            os.close(top)
        os.rmdir(path.name, dir_fd=parent)
    finally:
        os.close(parent)


def _flatten_and_remove(top: int) -> None:
    """Empty the directory open as ``top``: each subdirectory is moved up to ``top`` and
    emptied there in turn, then removed."""
    prefix = f".rm-{secrets.token_hex(6)}-"
    pending, moved = [None], 0  # None: top itself; else the name of a moved directory in top
    while pending:
        name = pending.pop()
        fd = top if name is None else _open_dir(top, name)
        try:
            for entry in os.listdir(fd):
                if name is None and entry.startswith(prefix):
                    continue  # moved here by us: in pending already
                try:
                    st = os.stat(entry, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    if st.st_mode & 0o700 != 0o700 and st.st_uid == os.geteuid():
                        _chmod_dir(fd, entry)  # moving a dir rewrites its "..": it must be writable
                    while True:
                        moved += 1
                        try:
                            os.rename(entry, f"{prefix}{moved}", src_dir_fd=fd, dst_dir_fd=top)
                            break
                        except OSError as exc:  # a name a node chose may match ours: the next one
                            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                                raise
                    pending.append(f"{prefix}{moved}")
                else:
                    os.unlink(entry, dir_fd=fd)
        finally:
            if fd != top:
                os.close(fd)
        if name is not None:
            os.rmdir(name, dir_fd=top)


def _open_dir(parent: int, name: str) -> int:
    """The directory ``name`` under ``parent``, opened without following a link, its owner's
    permissions restored first when it has none (a node may chmod 000 its own dirs)."""
    try:
        fd = os.open(name, _DIR, dir_fd=parent)
    except PermissionError:
        _chmod_dir(parent, name)
        fd = os.open(name, _DIR, dir_fd=parent)
    st = os.fstat(fd)
    if st.st_mode & 0o300 != 0o300 and st.st_uid == os.geteuid():
        os.fchmod(fd, 0o700)  # to unlink and rename what it holds, without root
    return fd


def _chmod_dir(parent: int, name: str) -> None:
    """chmod 0700 the directory ``name`` under ``parent`` through a descriptor that did not
    follow a link (a path could be swapped for a link to a host directory)."""
    fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    try:
        os.chmod(f"/proc/self/fd/{fd}", 0o700)
    finally:
        os.close(fd)


class UnsafeFile(Exception):
    """A file the trainer refuses to read out of a workspace: why, in a line."""


def read_beneath(directory: str | Path, relative: str, max_bytes: int) -> bytes | None:
    """The bytes of ``directory/relative``: None when it does not exist; UnsafeFile when any
    component is a link, when it is not a regular file (a FIFO, a socket, a device), when it
    has other hard links, or when it holds more than ``max_bytes``.

    Each component is opened relative to the previous one's descriptor with O_NOFOLLOW, so a
    node that replaced a directory by a link to the host's files leads nowhere."""
    parts = [p for p in relative.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"{relative!r} must name a path beneath the directory")
    try:
        fd = os.open(directory, _DIR)
    except FileNotFoundError:
        return None
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            # the last one as a path only: no open of a FIFO or a device, whatever it is
            flags = (os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC) if last else _DIR
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                return None
            except PermissionError:
                raise UnsafeFile(f"{'/'.join(parts[:i + 1])} is not readable") from None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafeFile(f"{'/'.join(parts[:i + 1])} is {_kind(fd, part)}") from None
                raise
            os.close(fd)
            fd = nxt
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(f"{relative} is {_kind_of(st.st_mode)}, not a regular file")
        if st.st_nlink != 1:
            raise UnsafeFile(f"{relative} has {st.st_nlink} hard links: a file of the node's own has one")
        if st.st_size > max_bytes:
            raise UnsafeFile(f"{relative} holds {st.st_size:,} bytes, over the cap of {max_bytes:,}")
        try:
            opened = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)  # that very file
        except PermissionError:
            raise UnsafeFile(f"{relative} is not readable") from None
        os.close(fd)
        fd = opened
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise UnsafeFile(f"{relative} holds over {max_bytes:,} bytes, the cap")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _kind(dir_fd: int, name: str) -> str:
    try:
        return _kind_of(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return "not a directory"


def _kind_of(mode: int) -> str:
    for test, kind in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return kind
    return "not a regular file"
