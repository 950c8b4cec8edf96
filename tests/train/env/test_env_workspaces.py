"""What the trainer does with the tree a node leaves: removes any of it, follows none of it.

A node owns its workspace: it may leave a tree of any depth, names no terminal prints, dirs
without permissions, FIFOs, sockets, and links to the host's files. ``remove_tree`` must
remove all of it and nothing else; ``read_beneath`` must read a regular file of the node's own
and nothing a link or a FIFO leads to."""
from __future__ import annotations

import fcntl
import os
import socket
import tempfile
from pathlib import Path

import pytest

from train.env import workspaces
from train.env.workspaces import UnsafeFile, read_beneath, remove_tree

NOBODY = 65534


@pytest.fixture(autouse=True)
def _removed(tmp_path):
    """pytest's own cleanup recurses: a deep tree a failed test left would break it."""
    yield
    for child in tmp_path.iterdir():
        remove_tree(child)


def _deep(top: Path, depth: int) -> None:
    """``depth`` nested dirs under ``top``, a file at the bottom: a path far past PATH_MAX."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("dd", dir_fd=fd)
        child = os.open("dd", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    with open(os.open("bottom.bin", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "wb") as fh:
        fh.write(b"x" * 4096)
    os.close(fd)


def _messy(top: Path, outside: Path) -> None:
    """Every kind of thing a node can leave, links to ``outside`` included."""
    top.mkdir()
    _deep(top, 3000)
    for name in ("line\nbreak", "-rf", " ", "...", "[bold red]", "\x1b[31mred"):
        (top / name).mkdir()
        (top / name / "f").write_text("x")
    bad = os.fsencode(str(top)) + b"/\xff\xfe-not-utf8"
    os.mkdir(bad)
    open(bad + b"/f", "w").close()
    locked = top / "locked" / "inner"
    locked.mkdir(parents=True)
    (locked / "f").write_text("x")
    os.chmod(locked, 0)
    os.chmod(locked.parent, 0)
    os.mkfifo(top / "fifo")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(top / "sock"))
    os.symlink(outside, top / "link-to-outside")
    os.symlink(outside / "keep.txt", top / "link-to-file")
    os.link(outside / "keep.txt", top / "hardlink-to-outside")
    os.symlink("link-to-outside", top / "link-chain")


@pytest.fixture
def outside(tmp_path):
    d = tmp_path / "outside"
    d.mkdir()
    (d / "keep.txt").write_text("the host's")
    return d


def test_remove_tree_removes_every_kind_of_tree_and_follows_no_link(tmp_path, outside):
    top = tmp_path / "ws"
    _messy(top, outside)
    remove_tree(top)
    assert not top.exists() and not top.is_symlink()
    assert (outside / "keep.txt").read_text() == "the host's"  # links unlinked, never followed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside"]  # nothing moved out of it


@pytest.fixture
def open_dir():
    """A directory another uid can reach (pytest's are 0700)."""
    d = Path(tempfile.mkdtemp(prefix="rm-test-"))
    os.chmod(d, 0o755)
    yield d
    remove_tree(d)


def test_remove_tree_without_root_restores_the_permissions_a_node_took_away(open_dir, outside):
    """The node's own uid (no root to bypass the modes): dirs of mode 000 at several depths."""
    if os.geteuid() != 0:
        pytest.skip("needs root to hand the tree to another uid")
    top = open_dir / "ws"
    _messy(top, outside)
    os.chmod(top / "locked", 0o700)  # chown it all, then lock again, as the node's uid
    os.chmod(top / "locked" / "inner", 0o700)
    for path in [top, *_walk(top)]:
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    os.chmod(top / "locked" / "inner", 0)
    os.chmod(top / "locked", 0)
    os.chmod(top, 0o500)  # the top itself unwritable too
    assert _as_nobody(lambda: remove_tree(top)) == "PermissionError"  # the top's parent is root's:
    # the last rmdir is refused ...
    assert sorted(os.listdir(top)) == []  # ... after everything under it went
    remove_tree(top)
    assert not top.exists() and (outside / "keep.txt").is_file()


def _as_nobody(fn) -> str:
    """Run ``fn`` in a forked child under uid nobody: the name of what it raised, or ''."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            fn()
            os.write(write, b"-")
        except BaseException as exc:  # noqa: BLE001 - reported to the parent by name
            os.write(write, type(exc).__name__.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        raised = fh.read().decode()
    os.waitpid(pid, 0)
    return raised.strip("-")


def _walk(top: Path) -> list[Path]:
    out, stack = [], [str(top)]
    while stack:
        d = stack.pop()
        for name in os.listdir(d):
            if name == "dd":  # the deep chain, past PATH_MAX: chowned through descriptors below
                continue
            p = os.path.join(d, name)
            out.append(Path(p))
            if os.path.isdir(p) and not os.path.islink(p):
                stack.append(p)
    _chown_deep(top / "dd")
    return out


def _chown_deep(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    while True:
        os.fchown(fd, NOBODY, NOBODY)
        if not os.path.exists(f"/proc/self/fd/{fd}/dd"):
            os.chown("bottom.bin", NOBODY, NOBODY, dir_fd=fd)
            os.close(fd)
            return
        child = os.open("dd", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child


def test_remove_tree_of_a_file_a_link_or_nothing(tmp_path, outside):
    os.symlink(outside, tmp_path / "top-link")
    remove_tree(tmp_path / "top-link")
    assert not (tmp_path / "top-link").is_symlink() and (outside / "keep.txt").is_file()
    remove_tree(tmp_path / "absent")
    remove_tree(tmp_path / "absent-parent" / "x")


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "submission").mkdir(parents=True)
    return ws


@pytest.mark.parametrize("attack, refusal", [
    ("dir_link", "submission is a symbolic link"),
    ("dir_link_chain", "submission is a symbolic link"),
    ("file_link", "submission/submission.csv is a symbolic link"),
    ("file_link_relative", "submission/submission.csv is a symbolic link"),
    ("hard_link", "2 hard links"),
    ("fifo", "a FIFO"),
    ("socket", "is a socket"),
    ("directory", "a directory"),
    ("too_large", "over the cap"),
])
def test_read_beneath_refuses_what_a_link_or_a_special_file_leads_to(tmp_path, outside, attack, refusal):
    (outside / "submission.csv").write_text("id,target\n1,perfect\n")
    ws = _workspace(tmp_path)
    sub = ws / "submission"
    if attack == "dir_link":
        sub.rmdir()
        os.symlink(outside, sub)
    elif attack == "dir_link_chain":
        sub.rmdir()
        os.symlink(outside, ws / "hop")
        os.symlink("hop", sub)
    elif attack == "file_link":
        os.symlink(outside / "submission.csv", sub / "submission.csv")
    elif attack == "file_link_relative":
        os.symlink("../../outside/submission.csv", sub / "submission.csv")
    elif attack == "hard_link":
        os.link(outside / "submission.csv", sub / "submission.csv")
    elif attack == "fifo":
        os.mkfifo(sub / "submission.csv")  # opened for reading, it would block the trainer
    elif attack == "socket":
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(sub / "submission.csv"))
    elif attack == "directory":
        (sub / "submission.csv").mkdir()
    elif attack == "too_large":
        (sub / "submission.csv").write_bytes(b"x" * 1001)
    with pytest.raises(UnsafeFile, match=refusal):
        read_beneath(ws, "submission/submission.csv", max_bytes=1000)


def test_read_beneath_reads_a_regular_file_and_nothing_absent(tmp_path):
    ws = _workspace(tmp_path)
    assert read_beneath(ws, "submission/submission.csv", 1000) is None
    (ws / "submission" / "submission.csv").write_bytes(b"id,target\n1,a\n")
    assert read_beneath(ws, "submission/submission.csv", 1000) == b"id,target\n1,a\n"
    assert read_beneath(tmp_path / "gone", "submission/submission.csv", 1000) is None
    with pytest.raises(ValueError):
        read_beneath(ws, "../ws/submission/submission.csv", 1000)


def test_a_dead_runs_tree_that_cannot_be_removed_does_not_block_the_next_node(tmp_path, monkeypatch):
    """The sweep logs what it cannot remove, keeps the dead owner's lock for the next sweep,
    and the node is staged."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "owner-dead0.lock").write_text("")
    (root / "node-dead0-abc").mkdir()
    _deep(root / "node-dead0-abc", 3000)
    real = workspaces.remove_tree

    def failing(path):
        raise PermissionError(13, "Operation not permitted", str(path))

    monkeypatch.setattr(workspaces, "remove_tree", failing)
    made = workspaces.new_workspace(root)
    assert made.is_dir() and (root / "owner-dead0.lock").exists()
    monkeypatch.setattr(workspaces, "remove_tree", real)
    assert workspaces.sweep(root) == [root / "node-dead0-abc"]  # a later sweep that can, does
    assert not (root / "owner-dead0.lock").exists()
    held = next(p for p in root.glob("owner-*.lock"))
    with open(held) as fh, pytest.raises(BlockingIOError):
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ours, held


def test_a_sweep_between_an_owners_file_and_its_lock_does_not_take_the_owner_for_dead(tmp_path, monkeypatch):
    """Another thread's (or process's) sweep that runs while this process makes its owner lock
    neither takes that lock nor fails the node: the file is locked before the sweep can see it.
    (Under load, that window made a node's staging fail with EAGAIN and its record infra.)"""
    root = tmp_path / "root"
    root.mkdir()
    real_flock, swept = fcntl.flock, []

    def flock_after_a_sweep(fd, op):
        if not swept:
            swept.append(None)
            workspaces._HELD.clear()  # as another process sees it: no token of ours is known
            swept[0] = workspaces.sweep(root)
        return real_flock(fd, op)

    held = dict(workspaces._HELD)
    monkeypatch.setattr(workspaces.fcntl, "flock", flock_after_a_sweep)
    try:
        made = workspaces.new_workspace(root)
    finally:
        workspaces._HELD.update(held)
    monkeypatch.setattr(workspaces.fcntl, "flock", real_flock)
    assert made.is_dir() and swept == [[]]
    [lock] = root.glob("owner-*.lock")
    assert made.name.startswith(f"node-{lock.name[len('owner-'):-len('.lock')]}-")
    with open(lock) as fh, pytest.raises(BlockingIOError):
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by its owner, this process
