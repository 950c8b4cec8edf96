"""Sandbox launcher: runs in the child before the solution, then execs it. Stdlib only.

Invoked as ``python _launch.py CONFIG.json`` (single-threaded, so namespace and privilege
changes are safe here, unlike in ``preexec_fn`` of a threaded parent). In order: new
network and mount namespaces, private mount propagation, an empty read-only tmpfs over every
hidden directory (the private answers), rlimits, then drop to the sandbox uid and exec.
With ``--probe`` it only tries the namespace steps and exits 0 when they work.
Any failure of the sandbox itself exits with SETUP_FAILED and a line on stderr.
"""
import ctypes
import json
import os
import resource
import sys

SETUP_FAILED = 97
CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 1, 2, 4, 0x4000, 0x40000


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(ret, what):
    if ret != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


MS_BIND = 0x1000


def isolate(network, hidden, reveal=(), stage=None):
    libc = _libc()
    flags = (CLONE_NEWNET if network else 0) | (CLONE_NEWNS if hidden or reveal else 0)
    if flags:
        _check(libc.unshare(flags), "unshare")
    if hidden or reveal:
        # Without this, the mounts below could propagate back into the host's mount table.
        _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    for index, (closed, keep) in enumerate(reveal):
        _reveal(libc, closed, keep, os.path.join(stage, str(index)))
    for path in hidden:
        _check(libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV,
                          b"size=4k,mode=000"), f"mount tmpfs over {path}")


def _reveal(libc, closed, keep, stage):
    """Replace the closed directory ``closed`` (e.g. /root, mode 700, holding the interpreter)
    by an empty world-traversable tmpfs that shows only its child ``keep``."""
    os.makedirs(stage)
    _check(libc.mount(keep.encode(), stage.encode(), None, MS_BIND | MS_REC, None), f"bind {keep}")
    _check(libc.mount(b"tmpfs", closed.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64k,mode=755"),
           f"mount tmpfs over {closed}")
    os.makedirs(keep, mode=0o755)
    _check(libc.mount(stage.encode(), keep.encode(), None, MS_BIND | MS_REC, None), f"rebind {keep}")


def limit(cfg):
    for name, value in cfg["rlimits"].items():
        if value is not None:
            soft, hard = value
            resource.setrlimit(getattr(resource, name), (int(soft), int(hard)))


def drop_privileges(uid):
    if uid is None:
        return
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def main(argv):
    if argv[1] == "--probe":
        isolate(network=True, hidden=[argv[2]])
        return 0
    with open(argv[1]) as fh:
        cfg = json.load(fh)
    try:
        isolate(cfg["network"], cfg["hidden"], cfg["reveal"], cfg["stage"])
        limit(cfg)
        drop_privileges(cfg["uid"])
    except OSError as exc:
        sys.stderr.write(f"SANDBOX-SETUP-FAILED: {exc}\n")
        return SETUP_FAILED
    os.execve(cfg["argv"][0], cfg["argv"], cfg["env"])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
