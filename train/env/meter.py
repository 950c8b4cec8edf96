"""What one node uses, sampled from outside its sandbox: CPU, memory, disk, and its own clock.

- **Memory** is the node's whole tree: each process's proportional set size (PSS, so pages
  a fork shares with its parent count once) less the pages it maps from its private tmpfs
  mounts, plus what those mounts hold (``/dev/shm`` and ``/tmp`` of its root, and the fallback's ``/var/tmp``, read
  through ``/proc/<pid>/root``; a file there is memory, in no process's PSS), plus the SysV
  shared memory segments of its IPC namespace, attached or not (``/proc/sysvipc/shm`` read
  from inside that namespace: ``setns`` of the watching thread, as root). Shared anonymous
  mappings count in the PSS of the processes that map them, split between them.
- **Disk** is everything under the workspace (allocated blocks, hard links once) but the
  task's public input, plus files a node process holds open after deleting them. The walk
  costs about 10 us a file, so it is taken at most once per 20 times its own last duration
  (5% of a core at most; every sample for a workspace of up to ~1,000 files); in between
  the last walk's total stands. A node writing faster than that gap passes its quota by what
  it wrote in the gap before it is stopped (each file stays under RLIMIT_FSIZE). Files
  outside the workspace that the node fills, its stdout and stderr, count too (``also``).
- **The node's clock** runs with the wall clock except while the node waits for a CPU that
  another process holds. Per sample, from each thread's run and run-queue wait times
  (``/proc/<pid>/task/<tid>/schedstat``): the node's demand ``D = (run + wait) / dt`` (its
  mean runnable threads), of which it could use ``U = min(D, cores)`` on a quiet machine; the
  CPU time it was denied, ``U * dt - run``, spread over its parallelism ``max(1, U)``, is time
  it lost: ``node_dt = dt - (U * dt - run) / max(1, U)``. A lone thread runnable throughout
  advances by the CPU time it got; an idle node, a node on a quiet machine, and a node whose
  threads outnumber the cores (it waits on itself, not on others) by ``dt``. Its timeout is read on this clock, and its idle check on
  its demand (run + wait, not run alone), so a node on a loaded machine is judged as on a
  quiet one. Without schedstat (a kernel without CONFIG_SCHED_INFO) both fall back to the
  wall clock and the CPU time.
"""
from __future__ import annotations

import ctypes
import functools
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

TMPFS_MOUNTS = ("dev/shm", "tmp", "var/tmp")
CLONE_NEWIPC = 0x08000000
WALK_SHARE = 0.05  # the most of its time the workspace walk may take


@dataclass
class Sample:
    cpu_s: float  # CPU seconds the tree got since the node started (live processes)
    demand_pct: float  # (run + run-queue wait) over the interval, percent of one core
    util_pct: float  # run alone over the interval, percent of one core
    node_dt: float  # seconds the node's own clock advanced over the interval
    mem_bytes: int
    disk_bytes: int


class NodeMeter:
    """Samples one node's process tree; ``sample(procs, dt)`` once per watch interval."""

    def __init__(self, workspace: Path | None, cores: int | None = None, also: tuple[Path, ...] = ()):
        self.workspace = workspace
        self.also = also  # files outside the workspace that the node writes (its output)
        self.cores = cores or len(os.sched_getaffinity(0))  # what the node may run on at once
        self.threads: dict[int, tuple[int, int]] = {}  # tid -> (run ns, wait ns) last seen
        self.cpu_gone = 0.0  # CPU seconds of processes no longer listed
        self.cpu_by_pid: dict[int, float] = {}
        self.host_devs = {_dev("/" + m) for m in TMPFS_MOUNTS}
        self.walked, self.next_walk = 0, 0.0  # the last walk's total, and when the next may run
        self.own_ipc = _ns_inode("/proc/self/ns/ipc")
        self.ipc_fd: int | None = None  # the node's IPC namespace, once one of its processes shows it

    def close(self) -> None:
        if self.ipc_fd is not None:
            os.close(self.ipc_fd)
            self.ipc_fd = None

    def sample(self, procs: list, dt: float) -> Sample:
        run_ns = wait_ns = 0
        cpu_now, mem = {}, 0
        tmpfs = {}
        for p in procs:
            for mount in TMPFS_MOUNTS:
                dev = _dev(f"/proc/{p.pid}/root/{mount}")
                if dev is not None and dev not in self.host_devs and dev not in tmpfs:
                    tmpfs[dev] = _used_bytes(f"/proc/{p.pid}/root/{mount}")
        for p in procs:
            cpu_now[p.pid] = _cpu_seconds(p)
            d_run, d_wait = self._sched_delta(p.pid)
            run_ns, wait_ns = run_ns + d_run, wait_ns + d_wait
            mem += _pss_bytes(p.pid, set(tmpfs))
        mem += self._sysv_bytes(procs)
        self.cpu_gone += sum(c for pid, c in self.cpu_by_pid.items() if pid not in cpu_now)
        self.cpu_by_pid = cpu_now
        run, wait = run_ns / 1e9, wait_ns / 1e9
        dt = max(dt, 1e-6)
        return Sample(cpu_s=self.cpu_gone + sum(cpu_now.values()), demand_pct=100 * (run + wait) / dt,
                      util_pct=100 * run / dt, node_dt=node_seconds(dt, run, wait, self.cores),
                      mem_bytes=mem + sum(tmpfs.values()), disk_bytes=self._disk(procs))

    def _sysv_bytes(self, procs: list) -> int:
        """What the SysV segments of the node's own IPC namespace hold (resident and swapped),
        attached or not; 0 where the node shares ours, or where we may not enter its namespace."""
        if self.ipc_fd is None:
            for p in procs:
                if _ns_inode(f"/proc/{p.pid}/ns/ipc") not in (None, self.own_ipc):
                    try:
                        self.ipc_fd = os.open(f"/proc/{p.pid}/ns/ipc", os.O_RDONLY | os.O_CLOEXEC)
                    except OSError:
                        continue
                    break
        if self.ipc_fd is None:
            return 0
        text = _read_in_namespace(self.ipc_fd, "/proc/sysvipc/shm")
        total = 0
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 16 and fields[-1].isdigit() and fields[-2].isdigit():
                total += int(fields[-2]) + int(fields[-1])  # rss, swap
            elif len(fields) >= 4 and fields[3].isdigit():  # a kernel without the rss column: its size
                total += int(fields[3])
        return total

    def _sched_delta(self, pid: int) -> tuple[int, int]:
        d_run = d_wait = 0
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return 0, 0
        for tid in map(int, tids):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                    run, wait = map(int, fh.read().split()[:2])
            except (OSError, ValueError):
                continue
            last_run, last_wait = self.threads.get(tid, (0, 0))
            d_run, d_wait = d_run + max(0, run - last_run), d_wait + max(0, wait - last_wait)
            self.threads[tid] = (run, wait)
        return d_run, d_wait

    def _disk(self, procs: list) -> int:
        seen: set[tuple[int, int]] = set()
        if self.workspace and time.monotonic() >= self.next_walk:
            start = time.monotonic()
            self.walked = _tree_blocks(self.workspace, seen, skip="input")
            self.next_walk = start + (time.monotonic() - start) / WALK_SHARE
        total = self.walked
        for path in self.also:
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
        for p in procs:  # deleted files still held open count until closed
            try:
                fds = os.listdir(f"/proc/{p.pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    st = os.stat(f"/proc/{p.pid}/fd/{fd}")
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and st.st_nlink == 0 and (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
        return total


def node_seconds(dt: float, run: float, wait: float, cores: int) -> float:
    """How far the node's clock advances over ``dt`` seconds of wall clock in which its threads
    ran ``run`` and waited on a run queue ``wait`` CPU-seconds (the module's docstring)."""
    usable = min((run + wait) / dt, cores)
    lost = max(0.0, usable * dt - run) / max(1.0, usable)
    return max(0.0, dt - lost)


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _tree_blocks(root: Path, seen: set, skip: str) -> int:
    """Blocks under ``root`` (its directories' own included, hard links once), but its entry
    ``skip``. Each directory is opened from its parent's descriptor, never by path, so a tree
    deeper than PATH_MAX is counted whole and a link is never followed; one descriptor is open
    per level of the current branch."""
    try:
        top = os.open(root, _DIR)
    except OSError:
        return 0
    total = 0

    def scan(fd: int, is_top: bool) -> list[str]:
        nonlocal total
        subdirs = []
        try:
            entries = os.scandir(fd)
        except OSError:
            return subdirs
        with entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
                if stat.S_ISDIR(st.st_mode) and not (is_top and entry.name == skip):
                    subdirs.append(entry.name)
        return subdirs

    stack = [(top, scan(top, True))]
    try:
        while stack:
            fd, subdirs = stack[-1]
            if not subdirs:
                os.close(stack.pop()[0])
                continue
            try:
                child = os.open(subdirs.pop(), _DIR, dir_fd=fd)
            except OSError:  # gone, or out of descriptors: that branch is not counted this walk
                continue
            stack.append((child, scan(child, False)))
    finally:
        for fd, _ in stack:
            os.close(fd)
    return total


def _cpu_seconds(p) -> float:
    try:
        times = p.cpu_times()
        return times.user + times.system
    except Exception:  # noqa: BLE001 - psutil.Error (gone, or not ours), without importing psutil here
        return 0.0


def _pss_bytes(pid: int, counted_devs: set[int]) -> int:
    """PSS less the shared memory it maps from a filesystem counted apart (the node's tmpfs
    mounts, ``counted_devs``) or from SysV segments (counted apart, attached or not); RSS where
    the kernel has no smaps_rollup. Shared anonymous memory stays in: it is in no file."""
    fields = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("Pss", "Pss_Shmem"):
                    fields[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError):
        return _rss_bytes(pid)
    if not fields.get("Pss_Shmem"):
        return fields.get("Pss", 0)
    return max(0, fields.get("Pss", 0) - _shmem_counted_apart(pid, counted_devs))


def _shmem_counted_apart(pid: int, counted_devs: set[int]) -> int:
    """Pss_Shmem of the mappings of ``pid`` that are files on ``counted_devs`` or SysV segments."""
    total, apart = 0, False
    try:
        with open(f"/proc/{pid}/smaps") as fh:
            for line in fh:
                head = line.split(None, 5)
                if "-" in head[0] and len(head) >= 5 and ":" in head[3]:  # a mapping's first line
                    major, _, minor = head[3].partition(":")
                    path = head[5].strip() if len(head) > 5 else ""
                    apart = path.startswith("/SYSV") or os.makedev(int(major, 16), int(minor, 16)) in counted_devs
                elif apart and head[0] == "Pss_Shmem:":
                    total += int(head[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return total


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _ns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


@functools.cache
def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _read_in_namespace(ns_fd: int, path: str) -> str:
    """``path`` read by this thread from inside the IPC namespace ``ns_fd``; '' where it may not
    enter it (not root). setns moves only the calling thread, and it is moved back before
    anything else runs on it."""
    libc = _libc()
    own = os.open("/proc/thread-self/ns/ipc", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(ns_fd, CLONE_NEWIPC) != 0:
            return ""
        try:
            with open(path) as fh:
                return fh.read()
        finally:
            if libc.setns(own, CLONE_NEWIPC) != 0:
                raise OSError(ctypes.get_errno(), "cannot return to the watcher's own IPC namespace")
    except OSError as exc:
        if "watcher's own" in str(exc):
            raise
        return ""
    finally:
        os.close(own)


def _dev(path: str) -> int | None:
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


def _used_bytes(path: str) -> int:
    try:
        vfs = os.statvfs(path)
    except OSError:
        return 0
    return (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize
