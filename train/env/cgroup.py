"""One cgroup v2 group per node, where a cgroup v2 group with the memory and pids controllers
is delegated to us (``train.env.sandbox.cgroup_delegation``).

The kernel then counts the node's memory, shared memory, tmpfs and page cache included, and
stops it at its limit (docs.kernel.org/admin-guide/cgroup-v2.html):

- ``trainer_leaf`` (once per process): cgroup v2 lets only leaves hold processes once a group
  enables controllers for its children ("no internal processes"), so the processes of the
  delegated group move to ``<delegated>/trainer`` before ``+memory +pids`` is written to the
  delegated group's ``cgroup.subtree_control``. The hierarchy's root is exempt from the rule
  (it has no ``cgroup.type``): nothing is moved there. Groups of nodes of a trainer killed
  with kill -9 (``node-*``, no process left) are removed here.
- ``NodeCgroup.create``: ``<delegated>/node-<pid>-<n>`` with ``memory.max`` (the node's
  memory limit), ``memory.swap.max`` 0 (no swap beyond it), ``memory.oom.group`` 1 (the
  kernel's OOM killer takes the whole node, not one of its processes) and ``pids.max``.
- the node's launcher joins it before it execs anything (``_launch.py --cgroup``), so every
  process the node makes is born inside.
- ``NodeCgroup.finish``: ``memory.events`` (``oom_kill``) and ``memory.peak`` read, every
  process left killed (``cgroup.kill``, where the kernel has it, else SIGKILL to each pid of
  ``cgroup.procs`` until none is left), and the group removed (rmdir), whatever happened.

Interface files are opened for writing without O_CREAT: the kernel makes them with the
group, and a file that is missing is a missing kernel feature, said by name, never a file
we would create. The two kernel calls that make and remove a group are ``_make_group`` and
``_remove_group`` (tests stand a kernel in for them over a plain directory).
"""
from __future__ import annotations

import errno
import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

TRAINER_LEAF = "trainer"
NODE_PREFIX = "node-"
CONTROLLERS = ("memory", "pids")
_counter = itertools.count()


class CgroupError(OSError):
    """A step on a node's cgroup failed: that node's infrastructure record, nobody else's."""


def _make_group(path: Path) -> None:
    os.mkdir(path)


def _remove_group(path: Path) -> None:
    os.rmdir(path)


def _write(path: Path, value: str) -> None:
    """Write one value to an existing interface file (no O_CREAT: see the module doc)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise CgroupError(exc.errno, f"cannot open {path} ({exc.strerror})") from exc
    try:
        os.write(fd, value.encode())
    except OSError as exc:
        raise CgroupError(exc.errno, f"cannot write {value!r} to {path} ({exc.strerror})") from exc
    finally:
        os.close(fd)


def _pids(procs: Path) -> list[int]:
    return [int(line) for line in procs.read_text().split()]


def trainer_leaf(delegated: Path, controllers: tuple[str, ...] = CONTROLLERS) -> None:
    """Make ``delegated`` a parent of per-node groups: our processes into the ``trainer``
    leaf (not at the hierarchy's root), ``+memory +pids`` for its children, and the groups a
    killed trainer left behind removed. Safe to run again."""
    if (delegated / "cgroup.type").exists():  # not the root: no internal processes allowed
        leaf = delegated / TRAINER_LEAF
        if not leaf.is_dir():
            try:
                _make_group(leaf)
            except FileExistsError:
                pass
            except OSError as exc:
                raise CgroupError(exc.errno, f"cannot make {leaf} ({exc.strerror})") from exc
        # A process may fork while we move: read again until the delegated group holds none.
        for _ in range(100):
            left = _pids(delegated / "cgroup.procs")
            if not left:
                break
            for pid in left:
                try:
                    _write(leaf / "cgroup.procs", str(pid))
                except CgroupError as exc:
                    if exc.errno != errno.ESRCH:  # gone meanwhile: nothing to move
                        raise
        else:
            raise CgroupError(errno.EBUSY, f"processes keep appearing in {delegated / 'cgroup.procs'}; "
                                           f"cannot move them all to {leaf}")
    if controllers:
        _write(delegated / "cgroup.subtree_control", " ".join(f"+{c}" for c in controllers))
    for stale in sorted(delegated.glob(f"{NODE_PREFIX}*")):
        try:
            if stale.is_dir() and not _pids(stale / "cgroup.procs"):
                _remove_group(stale)
        except OSError:
            pass  # another trainer's live node, or a group gone meanwhile


@dataclass
class CgroupOutcome:
    oom_kills: int  # memory.events oom_kill: processes the kernel killed at memory.max
    peak_bytes: int | None  # memory.peak (None where the kernel has no memory.peak)
    warnings: list[str]  # what could not be read, or removed, in a line each


class NodeCgroup:
    """One node's cgroup v2 group under a delegated directory prepared by ``trainer_leaf``."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls, delegated: Path, mem_bytes: int, nproc: int) -> NodeCgroup:
        """A fresh group with the node's limits; removed again if any limit cannot be set."""
        path = delegated / f"{NODE_PREFIX}{os.getpid()}-{next(_counter)}"
        try:
            _make_group(path)
        except OSError as exc:
            raise CgroupError(exc.errno, f"cannot make the node's cgroup {path} ({exc.strerror})") from exc
        group = cls(path)
        try:
            _write(path / "memory.max", str(mem_bytes))
            # absent where the kernel keeps no swap accounting (then nothing counts swap to bound)
            if (path / "memory.swap.max").exists():
                _write(path / "memory.swap.max", "0")
            _write(path / "memory.oom.group", "1")
            _write(path / "pids.max", str(nproc))
        except OSError:
            group.remove()
            raise
        return group

    @property
    def procs(self) -> Path:
        """The file the node's launcher writes its pid to (``_launch.py --cgroup``)."""
        return self.path / "cgroup.procs"

    def finish(self) -> CgroupOutcome:
        """Read what the kernel counted, kill what is left, remove the group. Never leaves the
        group behind without saying so: raises CgroupError when it cannot be removed."""
        warnings = []
        oom_kills, peak = 0, None
        try:
            events = dict(line.split() for line in (self.path / "memory.events").read_text().splitlines() if line.strip())
            oom_kills = int(events.get("oom_kill", 0))
        except (OSError, ValueError) as exc:
            warnings.append(f"cannot read {self.path / 'memory.events'}: {exc}")
        try:
            peak = int((self.path / "memory.peak").read_text().split()[0])
        except FileNotFoundError:
            pass  # a kernel before 5.19: the meter's peak stands
        except (OSError, ValueError, IndexError) as exc:
            warnings.append(f"cannot read {self.path / 'memory.peak'}: {exc}")
        self.remove()
        return CgroupOutcome(oom_kills, peak, warnings)

    def kill(self) -> None:
        """Every process in the group, at once where the kernel has cgroup.kill (5.14)."""
        if (self.path / "cgroup.kill").exists():
            _write(self.path / "cgroup.kill", "1")
            return
        for _ in range(50):  # a fork bomb refills the list: again, until it is empty
            try:
                left = _pids(self.procs)
            except FileNotFoundError:
                return
            if not left:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)

    def remove(self) -> None:
        """Kill what is left and rmdir the group; its processes take a moment to leave after
        SIGKILL (rmdir answers EBUSY meanwhile). Raises CgroupError when it stays."""
        if not self.path.exists():
            return
        last = None
        for attempt in range(100):
            try:
                self.kill()
                _remove_group(self.path)
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                last = exc
                time.sleep(0.01 * min(attempt + 1, 10))
        raise CgroupError(getattr(last, "errno", errno.EBUSY),
                          f"cannot remove the node's cgroup {self.path}: {last}")
