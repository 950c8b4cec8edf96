"""The allow-list sandbox: a node's filesystem built by bubblewrap (``bwrap``, Debian's
``bubblewrap`` package, the sandbox Flatpak uses).

The node's root is an empty tmpfs holding only

- ``/usr`` and the top-level links or dirs into it (``/bin``, ``/lib``, ...), read-only: the
  system's programs and libraries;
- the few files of ``/etc`` the dynamic linker and libc read (``ld.so.cache``, ...);
- the Python that runs the solution and the one that runs the launcher: their ``sys.prefix``
  and ``sys.base_prefix`` (a venv and the interpreter it was made from), read-only;
- the workspace (read-write) and the task's public files on ``./input`` (read-only);
- a fresh ``/proc`` (of the node's pid namespace), a minimal ``/dev`` with its own
  ``/dev/shm``, a private ``/tmp``;
- for a GPU node, its ``/dev/nvidia*`` devices and ``/sys`` (read-only), which CUDA reads.

Everything else on the machine (home directories, other tasks roots, the warehouse,
checkpoints, the checkout) is absent, not merely hidden. Network, pid, IPC and UTS namespaces
are new, as in the fallback sandbox. bwrap copies the mode of a bound path's parents, so
``/root`` would stay 0700 and shut out the node's uid: every parent on the way to a bind is
made here first, 0755 and empty.
"""
from __future__ import annotations

import functools
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
             "/etc/localtime", "/etc/nsswitch.conf")
TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
IN_SANDBOX = "/run/sandbox"  # where the launcher and its config appear inside


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def python_dirs(python: str) -> tuple[str, ...]:
    """The directories an interpreter needs: its prefixes (venv and base) and its binary's."""
    out = subprocess.run([python, "-c", "import sys, json; print(json.dumps([sys.prefix, "
                          "sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]))"],
                         capture_output=True, text=True, timeout=300, check=True)
    dirs = {str(Path(d).resolve()) for d in json.loads(out.stdout)}
    dirs |= {str(Path(python).parent.absolute()), str(Path(python).resolve().parent)}
    return tuple(sorted(d for d in dirs if d != "/"))


def argv(*, workspace: Path, public_dir: str, launcher: str, config: str, pythons: list[str],
         gpus: tuple[int, ...] = (), unshare_user: bool = False, hidden: tuple[str, ...] = (),
         tmpfs_bytes: int | None = None) -> list[str]:
    """The bwrap command line that runs ``python launcher config`` in the node's filesystem.

    ``hidden``: directories (a tasks root, private answers) to cover with an empty read-only
    tmpfs where a bind above them (an interpreter's prefix) would show them. ``tmpfs_bytes``
    caps the node's /tmp and /dev/shm (memory the node's limit counts)."""
    binds = _Binds()
    binds.ro("/usr")
    for top in TOP_LEVEL:
        if os.path.islink(top):
            binds.args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            binds.ro(top)
    for path in ETC_FILES:
        if os.path.exists(path):
            binds.ro(path)
    size = ["--size", str(tmpfs_bytes)] if tmpfs_bytes and _supports_size() else []
    for flag, dest in (("--proc", "/proc"), ("--dev", "/dev")):
        binds.mount(flag, dest)
    # bwrap's tmpfs is root's 0755: the node's uid could not write /tmp, nor make the POSIX
    # semaphores multiprocessing and joblib use in /dev/shm. Sticky and world-writable, as on
    # the host; both are memory, which the node's limit counts (train.env.meter).
    for dest in ("/tmp", "/dev/shm"):
        binds.args += ["--perms", "1777", *size, "--tmpfs", dest]
    for python in pythons:
        for d in python_dirs(python):
            binds.ro(d)
    binds.ro(launcher, f"{IN_SANDBOX}/launch.py")
    binds.ro(config, f"{IN_SANDBOX}/launch.json")
    binds.rw(str(workspace))
    binds.ro(public_dir, str(workspace / "input"))
    if gpus:
        for dev in sorted(glob.glob("/dev/nvidia*")):
            binds.args += ["--dev-bind", dev, dev]
        binds.ro("/sys")
        for lib_dir in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
            if lib_dir and os.path.isdir(lib_dir):
                binds.ro(os.path.realpath(lib_dir), lib_dir)
    for path in hidden:
        if workspace.is_relative_to(path):
            continue  # the sandbox (train.env.node's hidden dirs) never hides the workspace
        if any(Path(path).is_relative_to(b) for b in binds.bound):
            binds.args += ["--tmpfs", path, "--remount-ro", path]
    namespaces = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                  "--unshare-cgroup-try", "--hostname", "sandbox"]
    if unshare_user:
        namespaces.append("--unshare-user")
    return [bwrap_path() or "bwrap", *namespaces, "--die-with-parent", "--new-session",
            *binds.args, "--chdir", str(workspace), "--",
            sys.executable, "-I", f"{IN_SANDBOX}/launch.py", f"{IN_SANDBOX}/launch.json"]


@functools.cache
def _supports_size() -> bool:
    """bwrap >= 0.6 sizes a tmpfs (``--size``)."""
    out = subprocess.run([bwrap_path() or "bwrap", "--help"], capture_output=True, text=True)
    return "--size" in out.stdout + out.stderr


class _Binds:
    """bwrap mount arguments in order, each bind preceded by its missing parents (0755)."""

    def __init__(self):
        self.args: list[str] = []
        self.made: set[str] = {"/"}
        self.bound: list[str] = []

    def mount(self, flag: str, dest: str) -> None:
        self.args += [flag, dest]
        self.made.add(dest)

    def ro(self, src: str, dest: str | None = None) -> None:
        self._bind("--ro-bind", src, dest or src)

    def rw(self, src: str, dest: str | None = None) -> None:
        self._bind("--bind", src, dest or src)

    def _bind(self, flag: str, src: str, dest: str) -> None:
        if any(Path(dest).is_relative_to(b) for b in self.bound if flag == "--ro-bind" and dest == src):
            return  # already visible through a bind above it
        for parent in reversed(Path(dest).parents):
            p = str(parent)
            if p in self.made or any(Path(p).is_relative_to(b) for b in self.bound):
                continue
            self.args += ["--perms", "0755", "--dir", p]
            self.made.add(p)
        self.args += [flag, src, dest]
        self.bound.append(dest)
        self.made.add(dest)
