"""Sandbox launcher: runs in the child before the solution, then execs it. Stdlib only.

Invoked as ``python _launch.py CONFIG.json`` (single-threaded, so namespace and privilege
changes are safe here, unlike in ``preexec_fn`` of a threaded parent). In order: the host's
path-bound Unix sockets read from /proc, new network, pid, IPC and mount namespaces (inside a
user namespace of our own when not root), private mount propagation, a private tmpfs on /tmp,
/var/tmp and /dev/shm, an empty file bound over each of those sockets, an empty read-only
tmpfs over every hidden directory (the private answers), rlimits, then (not root) a nested
user namespace where the solution is not root, or (root) the drop to the sandbox uid, and exec.
With ``--probe`` it only tries the namespace steps and exits 0 when they work.
With ``--cgroup PROCS -- ARGV...`` it writes its own pid to PROCS (the ``cgroup.procs`` of the
node's cgroup v2 group, ``train/env/cgroup.py``) and execs ARGV, so bwrap or the launcher and
everything they start are born in the node's group.
Any failure of the sandbox itself exits with SETUP_FAILED and a line on stderr.

Under bubblewrap (the allow-list sandbox) the namespaces and mounts are bwrap's; the config
then asks for none, and the launcher only sets rlimits, drops to the node uid and execs. bwrap
reports a child killed by signal N as exit 128+N, so the launcher writes the solution's true
wait status to ``status_fd`` (an inherited pipe) for the caller.
"""
import ctypes
import errno
import json
import os
import resource
import signal
import sys

SETUP_FAILED = 97
CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWIPC = 0x00020000, 0x40000000, 0x20000000, 0x08000000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 0x4000, 0x40000


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(ret, what):
    if ret != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


MS_BIND = 0x1000
MNT_DETACH = 2


def isolate(network, hidden, reveal=(), private=None, userns=False):
    """``userns``: not root, so the namespaces below are made inside a user namespace of our
    own, where we are its root (mapped to our own uid); ``seal`` later hands the solution a
    nested one where it is not."""
    libc = _libc()
    # Read before the new network namespace: the host's Unix sockets bound to paths, covered below.
    sockets = host_unix_sockets() if private else []
    # A pid namespace: when the solution (its pid 1) ends, the kernel kills and reaps every
    # process it left, detached or not, so no orphan or zombie outlives the node.
    # The pid namespace brings a mount namespace, for the solution's own /proc (fresh_proc).
    # An IPC namespace: the node's SysV segments and message queues are its own, counted as its
    # memory (train.env.meter) and gone with it.
    flags = (CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC if network else 0) | (CLONE_NEWNS if network or hidden or reveal else 0)
    if flags and userns:
        uid, gid = os.getuid(), os.getgid()
        _check(libc.unshare(CLONE_NEWUSER), "unshare a user namespace")
        _map_ids(0, uid, 0, gid)
    if flags:
        _check(libc.unshare(flags), "unshare")
    if flags & CLONE_NEWNS:
        # Without this, the mounts below could propagate back into the host's mount table.
        _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    if private:
        _private_dirs(libc, private["dirs"], private["size"], private["keep"])
        # a closed dir under a private one is gone: the paths bound back have open parents
        reveal = [(c, k) for c, k in reveal if not any(_under(c, d) for d in private["dirs"])]
    for closed, keep in reveal:
        _reveal(libc, closed, keep)
    if private:
        _cover_sockets(libc, sockets, [*private["dirs"], *private.get("own", [])])
    for path in hidden:
        if not os.path.exists(path):  # already gone, under a closed dir that _reveal covered
            continue
        _check(libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV,
                          b"size=4k,mode=000"), f"mount tmpfs over {path}")


def _under(path, directory):
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _private_dirs(libc, dirs, size, keep):
    """A fresh tmpfs (sticky, world-writable, ``size`` bytes) over each of ``dirs`` (the host's
    /tmp and /dev/shm), and each path of ``keep`` that lay under one (the workspace, the
    interpreter) bound back at its place."""
    fds = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in keep]
    for d in dirs:
        if os.path.isdir(d):
            _check(libc.mount(b"tmpfs", d.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                              f"size={int(size)},mode=1777".encode()), f"mount tmpfs over {d}")
    for path, fd in fds:
        os.makedirs(path, mode=0o755, exist_ok=True)
        _check(libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, MS_BIND | MS_REC, None),
               f"bind {path}")
        os.close(fd)


def _map_ids(inner_uid, outer_uid, inner_gid, outer_gid):
    """This process's uid and gid in the user namespace it has just entered."""
    with open("/proc/self/setgroups", "w") as fh:
        fh.write("deny")
    with open("/proc/self/uid_map", "w") as fh:
        fh.write(f"{inner_uid} {outer_uid} 1")
    with open("/proc/self/gid_map", "w") as fh:
        fh.write(f"{inner_gid} {outer_gid} 1")


def seal(host_uid, host_gid):
    """In the fallback without root, just before exec: a nested user namespace and a copy of
    the mount namespace owned by it, where the solution is our own (host) uid, not root. The
    kernel locks every mount it inherits there, so nothing it can do uncovers what the mounts
    above hid (the answers, the host's /tmp, its sockets), and exec drops its capabilities."""
    libc = _libc()
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare the solution's user namespace")
    _map_ids(host_uid, 0, host_gid, 0)  # 0 here is the outer namespace's root: our host uid


def host_unix_sockets() -> list[str]:
    """Paths the host's Unix sockets are bound to, from /proc/<pid>/net/unix of every network
    namespace we may read (ours, and as root every process's), the path field of each line."""
    tables, seen = ["/proc/self/net/unix"], {_netns("self")}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        ns = _netns(pid)
        if ns is not None and ns not in seen:
            seen.add(ns)
            tables.append(f"/proc/{pid}/net/unix")
    paths = set()
    for table in tables:
        try:
            with open(table, "rb") as fh:
                next(fh, None)  # the header
                for line in fh:
                    fields = line.rstrip(b"\n").split(None, 7)
                    if len(fields) == 8 and fields[7].startswith(b"/"):  # not abstract (@), not unbound
                        paths.add(os.fsdecode(fields[7]))
        except OSError:  # the process ended, or its table is not ours to read
            continue
    return sorted(paths)


def _netns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _cover_sockets(libc, paths, spared):
    """An empty file of mode 000 bound over each of ``paths`` that is a socket outside
    ``spared`` (the private dirs, gone already, and the node's workspace): connect() there is
    refused (ECONNREFUSED), the socket stays the host's. The file lies on a small tmpfs that is
    detached once every bind holds it, so the node sees no trace of it."""
    import stat

    targets = []
    for path in paths:
        if any(_under(path, d) for d in spared):
            continue
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                targets.append(path)
        except OSError:  # bound in another mount namespace, or removed since
            continue
    if not targets:
        return
    scratch = "/tmp"  # the node's private /tmp: this tmpfs lies on it until detached
    _check(libc.mount(b"tmpfs", scratch.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=4k,mode=700"),
           "mount tmpfs for the socket cover")
    try:
        cover = os.path.join(scratch, "cover")
        os.close(os.open(cover, os.O_WRONLY | os.O_CREAT, 0o000))
        for path in targets:
            if libc.mount(cover.encode(), path.encode(), None, MS_BIND, None) != 0:
                err = ctypes.get_errno()
                if err not in (errno.ENOENT, errno.ENOTDIR):  # gone since: nothing to cover; else it would stay open
                    raise OSError(err, f"cover socket {path}: {os.strerror(err)}")
    finally:
        _check(libc.umount2(scratch.encode(), MNT_DETACH), "detach the socket cover's tmpfs")


def fresh_proc():
    """In the pid namespace's first process: a /proc of that namespace over the host's.

    The inherited /proc belongs to the parent's pid namespace, where getpid()'s 1 is the
    machine's init: CUDA's driver reads /proc/<its pid>/ and failed its initialisation there
    (cudaGetDeviceCount: error 304; on the H200 as root too). bwrap does the same with --proc.
    A kernel that refuses the mount (a container whose /proc has masked paths) leaves the
    inherited one: CPU nodes run as before."""
    _libc().mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)  # refused: nonzero, ignored


def _reveal(libc, closed, keep):
    """Replace the closed directory ``closed`` (e.g. /root, mode 700, holding the interpreter)
    by an empty world-traversable tmpfs that shows only its child ``keep``."""
    fd = os.open(keep, os.O_PATH | os.O_DIRECTORY)  # keeps ``keep`` reachable once covered
    _check(libc.mount(b"tmpfs", closed.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64k,mode=755"),
           f"mount tmpfs over {closed}")
    os.makedirs(keep, mode=0o755)
    _check(libc.mount(f"/proc/self/fd/{fd}".encode(), keep.encode(), None, MS_BIND | MS_REC, None),
           f"bind {keep}")
    os.close(fd)


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


def _report(fd, status):
    if fd is None:
        return
    try:
        os.write(fd, str(os.waitstatus_to_exitcode(status)).encode())
        os.close(fd)
    except OSError:
        pass


def join_cgroup(argv):
    """``--cgroup PROCS -- ARGV...``: into the node's cgroup, then exec ARGV."""
    procs, rest = argv[2], argv[argv.index("--") + 1:]
    try:
        fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)  # the kernel's file: never created here
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)
    except OSError as exc:
        sys.stderr.write(f"SANDBOX-SETUP-FAILED: cannot join the node's cgroup {procs}: {exc}\n")
        return SETUP_FAILED
    try:
        os.execv(rest[0], rest)
    except OSError as exc:
        sys.stderr.write(f"SANDBOX-SETUP-FAILED: cannot start {rest[0]}: {exc}\n")
    return SETUP_FAILED


def main(argv):
    if argv[1] == "--cgroup":
        return join_cgroup(argv)
    if argv[1] == "--probe":
        userns, ids = os.geteuid() != 0, (os.getuid(), os.getgid())
        isolate(network=True, hidden=[argv[2]], userns=userns)
        if userns:
            seal(*ids)
        return 0
    with open(argv[1]) as fh:
        cfg = json.load(fh)
    try:
        isolate(cfg["network"], cfg["hidden"], cfg["reveal"], cfg.get("private"), cfg.get("userns") is not None)
    except OSError as exc:
        sys.stderr.write(f"SANDBOX-SETUP-FAILED: {exc}\n")
        return SETUP_FAILED
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if cfg.get("status_fd") is not None:
        os.set_inheritable(cfg["status_fd"], False)  # the solution must not hold the pipe
    pid = os.fork()  # the child is pid 1 of the new pid namespace
    if pid == 0:
        try:
            if cfg["network"]:
                fresh_proc()
            limit(cfg)
            if cfg.get("userns") is not None:
                seal(*cfg["userns"])
            drop_privileges(cfg["uid"])
            os.execve(cfg["argv"][0], cfg["argv"], cfg["env"])
        except OSError as exc:
            sys.stderr.write(f"SANDBOX-SETUP-FAILED: {exc}\n")
        os._exit(SETUP_FAILED)
    _, status = os.waitpid(pid, 0)
    _report(cfg.get("status_fd"), status)
    if os.WIFSIGNALED(status):  # die the same way, so the caller sees the signal
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # whose handlers cannot be set (nor need to be)
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
