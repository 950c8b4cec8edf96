"""Sandboxed execution of one node's code.

Model-written code is untrusted. Each node gets a fresh workspace holding the task's public
data (``./input/``) and an empty ``./submission/``, and runs as a subprocess in its own
session and process group, through ``_launch.py``, with:

- where bubblewrap works (the default), an allow-list filesystem (``train/env/bwrap.py``): the
  node sees its workspace, the public data (read-only, bound, not copied), the Python it runs
  with and the system's libraries; nothing else on the machine exists for it;
- a time limit (``timeout_s``) on the node's own clock, and RLIMIT_CPU as a backstop;
- a memory limit (``mem_gi``) on its whole process tree and its private /tmp and /dev/shm,
  and a disk quota (``disk_gi``) on its workspace, both watched from outside
  (``train/env/meter.py``): ``memory_limit`` / ``disk_limit``; where a cgroup v2 group is
  delegated to us, also a group of the node's own with memory.max, memory.swap.max 0 and
  pids.max, where the kernel charges everything it holds (``train/env/cgroup.py``); RLIMIT_AS (memory, per
  process), RLIMIT_FSIZE (file size), RLIMIT_NPROC (processes) as backstops; a GPU node gets
  no RLIMIT_AS (a CUDA context reserves far more address space than it uses);
- a fresh network namespace (no interfaces but a down loopback: no network at all) and a pid
  namespace (when the solution ends, the kernel kills and reaps all it left behind);
- without bubblewrap nothing runs (``require_sandbox``) unless the caller names the risk
  (``--unsafe-no-sandbox``, ``Limits(allow_list=False)``): then a copy of the public data and
  a mount namespace with an empty read-only tmpfs over the tasks root and the private answers
  (a deny-list: the rest of the machine stays readable), private /tmp, /var/tmp and /dev/shm,
  the host's Unix sockets covered, and network, pid and IPC namespaces, made inside a user
  namespace when not root (``_launch.py``; docs/sandbox.md says what it does not cover);
- when we are root, a uid of its own (so RLIMIT_NPROC is per node, it cannot
  undo the mounts, and every process it leaves behind can be found and killed);
- a scrubbed environment (no inherited variables; HOME and TMPDIR inside the workspace);
- an idle check: a node whose CPU demand (run and run-queue wait, so a loaded machine does
  not make a busy node look idle) stays under ``idle_cpu_pct`` for ``idle_window_s`` is
  killed and reported as ``CpuIdleError``; a node given GPUs (``train/env/gpu.py``) is judged by its GPUs instead, under ``idle_gpu_pct`` for the same window: ``GpuIdleError``.

Workspaces live under one root (``train/env/workspaces.py``); those of a process killed with
kill -9 are removed by the next one. docs/sandbox.md has the whole picture.

Where the kernel or our privileges forbid a namespace or the uid switch, the node still runs,
with a warning (logged once and listed in ``ExecResult.warnings``) naming what is missing.
"""
from __future__ import annotations

import dataclasses
import fcntl
import functools
import itertools
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from train.env import workspaces
from train.env.errors import EnvError
from warehouse import vocabulary as vocab

log = logging.getLogger(__name__)

LAUNCHER = Path(__file__).resolve().parent / "_launch.py"
SETUP_FAILED = 97
# The namespace and bubblewrap probes start a Python: at load average 60 on 2 cores that took
# many seconds, and a probe that timed out would make train run refuse for want of bubblewrap.
PROBE_TIMEOUT_S = 300
UID_BASE = 1_500_000  # far above any real account; one uid per concurrently running node
UID_SPAN = 100_000
# One lock file per node uid in use on the machine, held (flock) from staging until the node's
# processes are gone: runs at once whose pids agree mod 1000 would otherwise share uids, and one
# node's straggler sweep (by uid) would kill the other's node.
UID_LOCKS = Path("/tmp/rollout-warehouse-node-uids")
_uid_counter = itertools.count()
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one node. Defaults suit real tasks; tests shrink them."""

    timeout_s: float = 600.0
    cpu_s: float | None = None  # RLIMIT_CPU; default: 2 x timeout_s x cpus
    # timeout_s runs on the node's own clock; a machine so loaded that the wall clock passes
    # this many times it cannot judge the node: it is stopped as infrastructure, not timed out
    wall_factor: float = 10.0
    cpus: int = 1  # threads offered to BLAS/OpenMP, and the 100% of cpu_util
    mem_gi: float = 8.0  # the node's whole tree and its tmpfs (train.env.meter); RLIMIT_AS per process
    disk_gi: float = 2.0  # everything the node writes into its workspace, in total
    fsize_mb: int = 1024  # RLIMIT_FSIZE: largest file a node may write (disk_gi bounds them all)
    nproc: int = 128  # RLIMIT_NPROC (only per node when a uid of its own is used)
    idle_window_s: float = 120.0
    idle_cpu_pct: float = 2.0  # percent of one core
    idle_gpu_pct: float = 1.0  # percent utilisation (NVML), mean over the node's GPUs
    sample_s: float = 0.2
    term_tail_chars: int = 4000
    max_submission_mb: int = 64
    python: str = sys.executable
    workspace_root: str | None = None  # default: train.env.workspaces.default_root()
    isolate: bool = True  # namespaces and uid switch when the machine allows them
    allow_list: bool = True  # bubblewrap's allow-list filesystem when bwrap works here


@dataclass(frozen=True)
class SandboxJob:
    """Everything a worker needs to run one node (picklable, for Ray)."""

    code: str
    public_dir: str
    hidden_dirs: tuple[str, ...]
    limits: Limits
    submitted_at: float = field(default_factory=time.time)
    gpus: tuple[int, ...] = ()  # host GPU indices this node may use (CUDA_VISIBLE_DEVICES)
    gpu_request: int = 0  # GPUs its PEP 723 [tool.resources] declared; the executor assigns them


@dataclass
class ExecResult:
    """What came back from running one node; grading happens in the caller."""

    outcome: str  # one of warehouse.vocabulary.OUTCOMES: exited | timeout | idle | gpu_idle | memory_limit | ...
    returncode: int | None = None
    exc_type: str | None = None
    term_tail: str = ""
    exec_time: float | None = None
    exec_timings: dict | None = None
    cpu_util_mean: float | None = None
    cpu_util_peak: float | None = None
    mem_peak_gi: float | None = None  # the tree's PSS plus its tmpfs, at its peak sample
    disk_peak_gi: float | None = None  # the workspace's, at its peak sample (not a record field)
    node_time: float | None = None  # seconds on the node's own clock (train.env.meter)
    gpu_util: float | None = None
    gpu_util_peak: float | None = None
    gpu_mem_used_gi: float | None = None
    gpu_name: str | None = None
    submission: bytes | None = None
    where: str = ""
    warnings: list[str] = field(default_factory=list)


class SandboxSetupError(RuntimeError):
    """The sandbox itself failed (workspace, spawn, namespaces): an infrastructure failure."""


def run_job(job: SandboxJob) -> ExecResult:
    """Stage, execute, retrieve and clean up one node. Never raises: any failure of these
    steps (the machine's, or one a node provoked, such as a tree its cleanup cannot remove)
    is this node's ``infra`` result, and its siblings' results stand."""
    started = time.time()
    where = f"local:{socket.gethostname()}:{os.getpid()}"
    base, lease, result, failure = None, None, None, None
    try:
        base = workspaces.new_workspace(job.limits.workspace_root)
        workspace, uid, warnings, lease = _stage(job, base)
        staged = time.time()
        result = _execute(job, workspace, uid)
        executed = time.time()
        result.submission, refused = _retrieve(workspace, job.limits)
        if refused:
            result.term_tail += f"\nsandbox: {refused}: not read, not graded"
        result.warnings = warnings
    except (OSError, SandboxSetupError) as exc:
        failure = f"sandbox failed: {exc}"
    except Exception as exc:  # noqa: BLE001 - one node's failure is its own record, not its siblings'
        failure = f"sandbox failed: {type(exc).__name__}: {exc}"
    finally:
        if base is not None:
            try:
                workspaces.remove_tree(base)
            except Exception as exc:  # noqa: BLE001 - e.g. a tree the node made unremovable
                failure = failure or f"sandbox could not remove the node's workspace {base}: {type(exc).__name__}: {exc}"
        if lease is not None:
            os.close(lease)  # the uid's processes are gone: another node may take it
    if failure is not None:
        return ExecResult(outcome=vocab.INFRA, exc_type=vocab.VERDICTS[vocab.INFRA].exc_type,
                          term_tail=failure[-job.limits.term_tail_chars:], where=where)
    result.where = where
    result.exec_timings = {"pending": round(started - job.submitted_at, 4),
                           "stage": round(staged - started, 4),
                           "exec": round(executed - staged, 4),
                           "retrieve": round(time.time() - executed, 4)}
    return result


# --- stage ---------------------------------------------------------------------------------

def _stage(job: SandboxJob, base: Path) -> tuple[Path, int | None, list[str], int | None]:
    """A fresh workspace in ``base``: input/ (public data), submission/, solution.py; owned by
    the node uid (and the lock that holds the uid, released once the node is over)."""
    workspace = base / "ws"
    caps = _caps(job.limits)
    if caps.bwrap:
        (workspace / "input").mkdir(parents=True)  # the public dir is bound here read-only
    else:
        shutil.copytree(job.public_dir, workspace / "input")
    (workspace / "submission").mkdir()
    (workspace / "tmp").mkdir()
    (workspace / "solution.py").write_text(job.code)
    # Without a mount namespace a node uid may be unable to reach the interpreter or workspace.
    own_uid = caps.uid_switch and (caps.namespaces or not _closed_ancestors(job.limits.python, workspace))
    uid, lease = lease_uid() if own_uid else (None, None)
    try:
        if uid is not None:
            for path in (workspace, workspace / "submission", workspace / "tmp", workspace / "solution.py"):
                os.chown(path, uid, uid)
            os.chmod(base, 0o755)
            os.chmod(workspace, 0o700)  # another node's uid (the fallback shows it the host) stays out
    except OSError:
        os.close(lease)
        raise
    return workspace, uid, list(caps.warnings), lease


def lease_uid() -> tuple[int, int]:
    """(a node uid no other node on the machine holds, the open lock file that holds it).

    Tries this process's block of 100 first (pid mod 1000), in turn, then the blocks after it;
    a uid is taken when its lock file's flock is: close the returned descriptor to give it back.
    """
    UID_LOCKS.mkdir(mode=0o700, exist_ok=True)
    start = os.getpid() % 1000 * 100 + next(_uid_counter) % 100
    for step in range(UID_SPAN):
        uid = UID_BASE + (start + step) % UID_SPAN
        fd = os.open(UID_LOCKS / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return uid, fd
    raise SandboxSetupError(f"no free node uid: all {UID_SPAN:,} from {UID_BASE:,} are held ({UID_LOCKS})")


@dataclass(frozen=True)
class Capabilities:
    namespaces: bool
    uid_switch: bool
    warnings: tuple[str, ...] = ()
    bwrap: bool = False  # the allow-list sandbox works here
    bwrap_missing: str = ""  # why not, when it does not
    cgroup: str | None = None  # the delegated cgroup v2 group under which each node gets its own


UNSAFE_FLAG = "--unsafe-no-sandbox"


class SandboxUnavailableError(EnvError):
    """No allow-list sandbox here, and the caller did not accept running without one."""


def require_sandbox(limits: Limits, where: str = "") -> None:
    """Refuse to run untrusted code outside bubblewrap unless ``limits`` turned it off by name
    (``allow_list=False``, ``isolate=False``: what ``--unsafe-no-sandbox`` sets). ``where``
    names a machine other than the caller's (a Ray worker) in the message."""
    if not (limits.isolate and limits.allow_list):
        return
    caps = capabilities()
    if caps.bwrap:
        return
    installed = "not installed" not in caps.bwrap_missing
    fix = ("Let it run (as root, or with unprivileged user namespaces: sysctl "
           "kernel.unprivileged_userns_clone=1)" if installed else
           "Install bubblewrap (apt-get install bubblewrap)")
    prefix, here, machine = (f"{where}: ", f"on {where}", "that") if where else ("", "here", "this")
    raise SandboxUnavailableError(
        f"{prefix}{caps.bwrap_missing}: model-written code cannot be sandboxed {here}. {fix}, or pass "
        f"{UNSAFE_FLAG} to run it where it can read every file on {machine} machine but the tasks root.")


_NO_ISOLATION = Capabilities(False, False, ("isolation disabled by Limits(isolate=False)",))


def _caps(limits: Limits) -> Capabilities:
    """What this node gets: the machine's capabilities, less what ``limits`` turns off."""
    if not limits.isolate:
        return _NO_ISOLATION
    caps = capabilities()
    if caps.bwrap and not limits.allow_list:
        return dataclasses.replace(caps, bwrap=False)
    return caps


@functools.cache
def capabilities() -> Capabilities:
    """What isolation this machine allows; probed once per process, warned about once."""
    warnings = []
    probe_dir = tempfile.mkdtemp(prefix="probe-")
    try:
        probe = subprocess.run([sys.executable, str(LAUNCHER), "--probe", probe_dir],
                               capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        namespaces = probe.returncode == 0
        if not namespaces:
            warnings.append("no network/mount namespace (needs root or user namespaces): nodes can "
                            f"reach the network and read the private answers. {probe.stderr.strip()[-200:]}")
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    uid_switch = os.geteuid() == 0
    allow_list, why = _probe_bwrap(uid_switch)
    if not allow_list:
        warnings.append(f"{why}: nodes run only with {UNSAFE_FLAG}, in the deny-list sandbox, where "
                        "a node can read every file on the machine but the tasks root (install "
                        "bubblewrap: apt-get install bubblewrap)")
    if not uid_switch:
        warnings.append("not root: nodes run under our own uid, so RLIMIT_NPROC is shared "
                        "and escaped processes are found by process group only")
    group, no_group = node_cgroups()
    if group is None:
        warnings.append(f"{no_group}: a node's memory limit is the meter's, sampled every Limits.sample_s "
                        "from outside (its processes, tmpfs and SysV segments), not memory.max")
    else:
        log.info("sandbox: %s", cgroup_memory())
    for line in warnings:
        log.warning("sandbox: %s", line)
    return Capabilities(namespaces, uid_switch, tuple(warnings), allow_list, why,
                        str(group) if group is not None else None)


def node_cgroups(mountinfo: str = "/proc/self/mountinfo",
                 membership: str = "/proc/self/cgroup") -> tuple[Path | None, str]:
    """(the delegated cgroup v2 group, made ready to hold one group per node, "") or (None,
    why nodes get none here). Moves this process's group's processes to its ``trainer`` leaf
    (``train.env.cgroup.trainer_leaf``): call once per process (``capabilities`` does)."""
    from train.env import cgroup

    directory, why = cgroup_delegation(mountinfo, membership)
    if directory is None:
        return None, why
    try:
        cgroup.trainer_leaf(directory)
    except OSError as exc:
        return None, f"the delegated cgroup v2 group {directory} cannot hold nodes' groups ({exc})"
    return directory, ""


def cgroup_memory(mountinfo: str = "/proc/self/mountinfo", membership: str = "/proc/self/cgroup") -> str:
    """What counts a node's memory here, in a line: why nodes get no cgroup of their own, or
    where they get one (a description only: ``node_cgroups`` makes the group ready)."""
    directory, why = cgroup_delegation(mountinfo, membership)
    if directory is None:
        return why
    return (f"each node gets a cgroup v2 group of its own under {directory} (memory.max at its memory "
            "limit, memory.swap.max 0, memory.oom.group 1, pids.max), beside the meter")


def cgroup_delegation(mountinfo: str = "/proc/self/mountinfo",
                      membership: str = "/proc/self/cgroup") -> tuple[Path | None, str]:
    """(this process's cgroup v2 directory, "") where it offers the memory and pids controllers
    and we may write it (a delegated subtree: what per-node cgroups with memory.max,
    memory.swap.max and pids.max need); else (None, why not, in a line).

    ``mountinfo`` and ``membership`` are /proc/self/mountinfo and /proc/self/cgroup: the
    cgroup2 mount (on a hybrid host /sys/fs/cgroup/unified, beside the v1 hierarchies that
    hold the memory controller), and our group in it (the ``0::`` line)."""
    try:
        mounts = Path(mountinfo).read_text().splitlines()
        groups = Path(membership).read_text().splitlines()
    except OSError as exc:
        return None, f"cannot read {exc.filename} ({exc.strerror})"
    v2 = []  # (mount point, the hierarchy's path mounted there)
    for line in mounts:
        before, sep, after = line.partition(" - ")
        fields = before.split()
        if sep and after.split()[:1] == ["cgroup2"] and len(fields) >= 5:
            v2.append((_unescape_mount(fields[4]), _unescape_mount(fields[3])))
    if not v2:
        return None, "no cgroup v2 hierarchy is mounted (cgroup v1 only)"
    ours = next((line[3:] for line in groups if line.startswith("0::")), None)
    if ours is None:
        return None, f"this process is in no cgroup v2 group ({membership} has no 0:: line)"
    found = [(point, root) for point, root in v2 if ours == root or ours.startswith(root.rstrip("/") + "/")]
    if not found:
        return None, f"our cgroup v2 group {ours} lies outside every mounted cgroup2 ({', '.join(p for p, _ in v2)})"
    point, root = found[0]
    directory = Path(point) / os.path.relpath(ours, root)
    if directory.name == "trainer" and _enabled(directory.parent):
        directory = directory.parent  # our own trainer leaf (train.env.cgroup.trainer_leaf), made before
    controllers = directory / "cgroup.controllers"
    try:
        offered = controllers.read_text().split()
    except OSError as exc:
        return None, f"cannot read {controllers} ({exc.strerror})"
    missing = [c for c in ("memory", "pids") if c not in offered]
    if missing:
        return None, (f"the cgroup v2 group {directory} offers {' '.join(offered) or 'no controllers'}, not "
                      f"{' and '.join(missing)} (a cgroup v1 or hybrid host keeps them in v1)")
    for path in (directory, directory / "cgroup.subtree_control", directory / "cgroup.procs"):
        if not os.access(path, os.W_OK):
            return None, f"the cgroup v2 group {directory} is not delegated to us ({path} is not writable)"
    return directory, ""


def _enabled(parent: Path) -> bool:
    """Whether ``parent`` already enables memory and pids for its children, and we may write it."""
    try:
        enabled = (parent / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False
    return all(c in enabled for c in ("memory", "pids")) and os.access(parent / "cgroup.subtree_control", os.W_OK)


def _unescape_mount(field: str) -> str:
    """A path of /proc/self/mountinfo, whose spaces, tabs, newlines and backslashes are octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _probe_bwrap(as_root: bool) -> tuple[bool, str]:
    """(works, why not): run an empty launcher config inside bwrap's allow-list."""
    from train.env import bwrap

    if bwrap.bwrap_path() is None:
        return False, "bubblewrap (bwrap) is not installed"
    base = Path(tempfile.mkdtemp(prefix="probe-"))
    try:
        (base / "ws").mkdir()
        config = base / "launch.json"
        config.write_text(json.dumps({"network": False, "hidden": [], "reveal": [], "uid": None,
                                      "argv": [sys.executable, "-c", "pass"], "env": {}, "rlimits": {}}))
        argv = bwrap.argv(workspace=base / "ws", public_dir=str(base / "ws"), launcher=str(LAUNCHER),
                          config=str(config), pythons=[sys.executable], unshare_user=not as_root)
        probe = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"bubblewrap failed to start ({exc})"
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if probe.returncode != 0:
        return False, f"bubblewrap cannot build a sandbox here ({probe.stderr.strip()[-200:]})"
    return True, ""


# --- execute -------------------------------------------------------------------------------

def _execute(job: SandboxJob, workspace: Path, uid: int | None) -> ExecResult:
    """Run the node: in a cgroup v2 group of its own where one is delegated (``caps.cgroup``),
    removed again whatever happens; else as before, under the meter alone."""
    caps = _caps(job.limits)
    if caps.cgroup is None:
        return _execute_in(job, workspace, uid, caps, None)
    from train.env.cgroup import NodeCgroup

    # pids.max: the node's processes and threads, plus bwrap's and the launcher's own
    group = NodeCgroup.create(Path(caps.cgroup), int(job.limits.mem_gi * 2**30), job.limits.nproc + CGROUP_OWN_PIDS)
    try:
        result = _execute_in(job, workspace, uid, caps, group)
    finally:
        counted = group.finish()  # raises (this node's infra record) if the group stays
    return _counted(result, counted)


CGROUP_OWN_PIDS = 4


def _counted(result: ExecResult, counted) -> ExecResult:
    """The node's result with what its cgroup counted: an OOM kill at memory.max is a
    memory_limit (as the meter's verdict), and memory.peak a floor under the meter's peak."""
    if counted.oom_kills and result.outcome == vocab.EXITED:
        result.outcome = vocab.MEMORY_LIMIT
        result.exc_type = vocab.VERDICTS[vocab.MEMORY_LIMIT].exc_type
        result.term_tail += f"\nsandbox: the kernel killed {counted.oom_kills} process(es) at the node's memory.max"
    if counted.peak_bytes is not None:
        result.mem_peak_gi = round(max(result.mem_peak_gi or 0.0, counted.peak_bytes / 2**30), 4)
    for line in counted.warnings:
        result.term_tail += f"\nsandbox: {line}"
    return result


def _execute_in(job: SandboxJob, workspace: Path, uid: int | None, caps: Capabilities, group) -> ExecResult:
    limits = job.limits
    output = workspace.parent / "output.log"
    config = workspace.parent / "launch.json"
    status_read, status_write = os.pipe() if caps.bwrap else (None, None)
    # read by the launcher before it drops to the node's uid; the node's output is for us alone
    config.touch(mode=0o600)
    config.write_text(json.dumps(_launch_config(job, workspace, uid, caps, status_write)))
    argv = _argv(job, workspace, config, caps)
    if group is not None:  # born in the node's group: the launcher joins it, then execs bwrap or itself
        argv = [sys.executable, str(LAUNCHER), "--cgroup", str(group.procs), "--", *argv]
    try:
        with open(os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600), "wb") as out:
            try:
                proc = subprocess.Popen(argv, cwd=workspace, stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, env=_scrubbed_env(workspace, job),
                                        start_new_session=True,
                                        pass_fds=(status_write,) if caps.bwrap else ())
            except OSError as exc:
                raise SandboxSetupError(f"cannot spawn the node: {exc}") from exc
            spawn_hwm = own_peak_rss()  # read after the spawn: the most the child can have inherited
            if caps.bwrap:
                os.close(status_write)
                status_write = None
            watch = _watch(proc, limits, uid, job.gpus, workspace, output, spawn_hwm)
        tail = _tail(output, limits.term_tail_chars)
        if watch["starved"]:
            tail += (f"\nsandbox: stopped after {watch['wall']:.0f} s of wall clock, {watch['node_time']:.0f} s "
                     f"on the node's own clock: the machine is too loaded to judge it")
        if caps.bwrap:
            _solution_status(watch, status_read, tail)
    finally:
        for fd in (status_read, status_write):
            if fd is not None:
                os.close(fd)
    if watch["returncode"] == SETUP_FAILED and "SANDBOX-SETUP-FAILED" in tail:
        raise SandboxSetupError(tail.strip().splitlines()[-1])
    return ExecResult(outcome=watch["outcome"], returncode=watch["returncode"], term_tail=tail,
                      exc_type=_exc_type(watch, tail), exec_time=watch["wall"],
                      cpu_util_mean=watch["cpu_mean"], cpu_util_peak=watch["cpu_peak"],
                      mem_peak_gi=watch["mem_peak_gi"], disk_peak_gi=watch["disk_peak_gi"],
                      node_time=watch["node_time"], **watch["gpu"])


def _argv(job: SandboxJob, workspace: Path, config: Path, caps: Capabilities) -> list[str]:
    if not caps.bwrap:
        return [sys.executable, str(LAUNCHER), str(config)]
    from train.env import bwrap

    return bwrap.argv(workspace=workspace, public_dir=job.public_dir, launcher=str(LAUNCHER),
                      config=str(config), pythons=list(dict.fromkeys([sys.executable, job.limits.python])),
                      gpus=job.gpus, unshare_user=not caps.uid_switch, hidden=job.hidden_dirs,
                      tmpfs_bytes=int(job.limits.mem_gi * 2**30))


def _solution_status(watch: dict, status_read: int, tail: str) -> None:
    """The solution's own exit status, which bwrap folds into 128+N for a signal."""
    os.set_blocking(status_read, False)
    try:
        reported = os.read(status_read, 32).decode()
    except BlockingIOError:
        reported = ""
    if reported.lstrip("-").isdigit():
        watch["returncode"] = int(reported)
    elif watch["outcome"] == "exited" and tail.strip().splitlines()[-1:] and \
            tail.strip().splitlines()[-1].startswith("bwrap:"):
        raise SandboxSetupError(tail.strip().splitlines()[-1])


def _launch_config(job: SandboxJob, workspace: Path, uid: int | None, caps: Capabilities,
                   status_fd: int | None = None) -> dict:
    limits = job.limits
    hidden = []
    for d in sorted(job.hidden_dirs, key=len) if caps.namespaces and not caps.bwrap else []:
        # Never hide the workspace, and skip a dir already under a hidden one (it is gone).
        if not _is_within(workspace, d) and not any(_is_within(Path(d), h) for h in hidden):
            hidden.append(d)
    cpu_s = limits.cpu_s or 2 * limits.timeout_s * limits.cpus
    mem = int(limits.mem_gi * 2**30)
    fsize = int(limits.fsize_mb * 2**20)
    reveal = _closed_ancestors(limits.python, workspace) if uid is not None and not caps.bwrap else []
    fallback_ns = caps.namespaces and not caps.bwrap
    return {
        "network": fallback_ns, "hidden": hidden, "uid": uid,
        # not root: the namespaces are made in a user namespace of the launcher's own
        "userns": [os.getuid(), os.getgid()] if fallback_ns and os.geteuid() != 0 else None,
        "reveal": reveal, "status_fd": status_fd,
        # the fallback's own /tmp, /var/tmp and /dev/shm (tmpfs, capped at the memory limit,
        # counted by the meter), with what the node needs from under them (its workspace, its
        # Python) bound back; every host Unix socket outside them and its workspace covered
        "private": {"dirs": list(PRIVATE_DIRS), "size": mem, "own": [str(workspace.resolve())],
                    "keep": _kept_under(PRIVATE_DIRS, [str(workspace), *_python_dirs(limits.python)])}
        if fallback_ns else None,
        "argv": [limits.python, "-u", "solution.py"],
        "env": _scrubbed_env(workspace, job),
        "rlimits": {
            "RLIMIT_CPU": (int(cpu_s), int(cpu_s) + 5),
            "RLIMIT_AS": None if job.gpus else (mem, mem),
            "RLIMIT_FSIZE": (fsize, fsize),
            "RLIMIT_NPROC": (limits.nproc, limits.nproc) if uid is not None else None,
            "RLIMIT_CORE": (0, 0),
        },
    }


PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


def _python_dirs(python: str) -> tuple[str, ...]:
    from train.env import bwrap

    try:
        return bwrap.python_dirs(python)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxSetupError(f"cannot ask {python} for its prefix: {exc}") from exc


def _kept_under(private: tuple[str, ...], paths: list[str]) -> list[str]:
    """Those of ``paths`` that lie under one of the ``private`` dirs (the outermost of each)."""
    under = sorted({str(Path(p).resolve()) for p in paths
                    if any(Path(p).resolve().is_relative_to(d) for d in private)}, key=len)
    return [p for i, p in enumerate(under) if not any(Path(p).is_relative_to(q) for q in under[:i])]


def _closed_ancestors(python: str, workspace: Path) -> list[tuple[str, str]]:
    """(dir, child) pairs on the interpreter's and workspace's paths where dir is not
    world-traversable.

    The node's uid could not exec an interpreter under /root (mode 700) or enter a workspace
    under pytest's 0700 temp dirs; the launcher shows it just the child on the path (e.g.
    /root/.pyenv) over an otherwise empty tmpfs.
    """
    pairs = []
    for path in {Path(python).resolve(), Path(python).absolute(), workspace.resolve()}:
        for child in [path, *path.parents][:-1]:
            parent = child.parent
            if not os.stat(parent).st_mode & 0o001 and (str(parent), str(child)) not in pairs:
                pairs.append((str(parent), str(child)))
    return sorted(pairs, key=lambda pair: len(pair[0]))


def _is_within(path: Path, directory: str) -> bool:
    return Path(path).resolve().is_relative_to(Path(directory).resolve())


def _scrubbed_env(workspace: Path, job: SandboxJob) -> dict:
    limits = job.limits
    threads = str(limits.cpus)
    # A node without a GPU sees none; one with a GPU sees only its own, and the driver's
    # libraries where the machine points LD_LIBRARY_PATH at them (containers often do).
    gpu = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, job.gpus)), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    if job.gpus and os.environ.get("LD_LIBRARY_PATH"):
        gpu["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
    return {**gpu,
        "PATH": f"{Path(limits.python).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workspace), "TMPDIR": str(workspace / "tmp"), "LANG": "C.UTF-8",
        # the node's uid has no passwd entry: getpass.getuser() (torch.compile's cache dir) reads these
        "USER": "node", "LOGNAME": "node",
        "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
    }


def _watch(proc: subprocess.Popen, limits: Limits, uid: int | None, gpus: tuple[int, ...] = (),
           workspace: Path | None = None, output: Path | None = None, spawn_hwm: int | None = None) -> dict:
    """Poll the node until it exits, or is stopped (time, idleness, memory, disk); kill
    everything it left behind. Time and idleness are read on the node's own clock and demand
    (train.env.meter), so the machine's load does not change the verdict. The node's
    stdout and stderr (``output``, a file on the host) count against its disk quota.
    ``spawn_hwm``: our peak RSS once the node was spawned (:func:`own_peak_rss`)."""
    import psutil

    from train.env.gpu import GpuMonitor
    from train.env.meter import NodeMeter

    monitor = GpuMonitor(gpus) if gpus else None
    judge_gpu = monitor is not None and monitor.available  # a GPU node idles on its GPUs
    meter = NodeMeter(workspace, also=(output,) if output is not None else ())
    start = last = time.monotonic()
    node_time, outcome, idle_since, starved = 0.0, vocab.EXITED, None, False
    peak_mem, peak_disk, utils, cpu_seen = 0, 0, [], 0.0
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(limits.sample_s)
            now = time.monotonic()
            sample = meter.sample(_node_processes(psutil, proc.pid, uid), now - last)
            node_time, last, cpu_seen = node_time + sample.node_dt, now, max(cpu_seen, sample.cpu_s)
            peak_mem, peak_disk = max(peak_mem, sample.mem_bytes), max(peak_disk, sample.disk_bytes)
            utils.append(sample.util_pct)
            gpu_util = monitor.sample() if monitor is not None else None
            idle = (gpu_util is not None and gpu_util < limits.idle_gpu_pct) if judge_gpu \
                else sample.demand_pct < limits.idle_cpu_pct
            idle_since = (idle_since if idle_since is not None else node_time) if idle else None
            outcome = _stopped(limits, node_time, idle_since, sample, judge_gpu)
            if outcome == vocab.EXITED and now - start > limits.wall_factor * limits.timeout_s:
                outcome, starved = vocab.INFRA, True
            if outcome != vocab.EXITED:
                _kill_all(proc.pid, uid, psutil)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
    except BaseException:  # the watcher failed: the node must not outlive it
        _kill_all(proc.pid, uid, psutil)
        os.wait4(proc.pid, 0)
        raise
    finally:
        meter.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    # Stragglers that outlived a normal exit: by uid and process group only. The pid is reaped,
    # so its number may already name another process (another node's bwrap, say), whose tree
    # must not be killed; and a reaped process's children were reparented, out of its tree.
    _kill_all(proc.pid, uid, psutil, tree=False)
    wall = time.monotonic() - start
    # bwrap's rusage misses the solution (its grandchild, reaped inside the pid namespace)
    cpu_total = max(usage.ru_utime + usage.ru_stime, cpu_seen)
    # The rusage peak catches a spike between samples, but the kernel starts a child's ru_maxrss at
    # the peak RSS of the process it was forked from (exec records the old mm's high-water mark):
    # a trainer holding a model would lend every node its own peak. Only a peak above ours is the node's.
    if spawn_hwm is not None and usage.ru_maxrss * 1024 > spawn_hwm:
        peak_mem = max(peak_mem, usage.ru_maxrss * 1024)
    return {"outcome": outcome, "returncode": proc.returncode, "wall": round(wall, 4),
            "node_time": round(node_time, 4), "starved": starved,
            "cpu_mean": round(100 * cpu_total / max(wall, 1e-6) / limits.cpus, 2),
            "cpu_peak": round(max(utils, default=100 * cpu_total / max(wall, 1e-6)) / limits.cpus, 2),
            "mem_peak_gi": round(peak_mem / 2**30, 4), "disk_peak_gi": round(peak_disk / 2**30, 4),
            "gpu": monitor.summary() if monitor is not None else {}}


def _stopped(limits: Limits, node_time: float, idle_since: float | None, sample, judge_gpu: bool) -> str:
    """The outcome that stops the node at this sample, else ``exited`` (it goes on)."""
    if sample.mem_bytes > limits.mem_gi * 2**30:
        return vocab.MEMORY_LIMIT
    if sample.disk_bytes > limits.disk_gi * 2**30:
        return vocab.DISK_LIMIT
    if node_time > limits.timeout_s:
        return vocab.TIME_LIMIT
    if idle_since is not None and node_time - idle_since >= limits.idle_window_s:
        return vocab.GPU_IDLE if judge_gpu else vocab.IDLE
    return vocab.EXITED


def _node_processes(psutil, pid: int, uid: int | None, tree: bool = True) -> list:
    """The node's process tree (``tree``: only while ``pid`` is not yet reaped), plus (own uid)
    anything it detached with setsid/double fork."""
    procs = {}
    if tree:
        try:
            root = psutil.Process(pid)
            procs = {p.pid: p for p in [root, *root.children(recursive=True)]}
        except psutil.Error:
            pass
    if uid is not None:
        for p in psutil.process_iter(["uids"]):
            if p.info["uids"] and p.info["uids"].real == uid:
                procs.setdefault(p.pid, p)
    return list(procs.values())


def own_peak_rss() -> int | None:
    """This process's peak resident set (VmHWM) in bytes, or None where /proc does not say."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _kill_all(pid: int, uid: int | None, psutil, tree: bool = True) -> None:
    # Kill the node's processes below the launcher first: the launcher then reaps its child
    # (pid 1 of the node's pid namespace, whose death takes the namespace with it) and exits.
    # killpg(pid) is the last resort without namespaces; the uid sweep catches processes that
    # left the group. A fork bomb refills: repeat. ``tree=False`` once ``pid`` is reaped (see
    # _watch): no tree, and the group only while no new process holds the number (the kernel
    # gives no new process a pid that a live group still uses).
    for attempt in range(50):
        alive = [p for p in _node_processes(psutil, pid, uid, tree) if p.pid != pid and _alive(p)]
        if not alive:
            break
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        time.sleep(0.02)
    if not tree and psutil.pid_exists(pid):
        return  # reaped, and the number taken by a new process: no group of ours can hold it
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _alive(p) -> bool:
    try:
        return p.is_running() and p.status() != "zombie"
    except Exception:  # noqa: BLE001 - psutil.Error, without importing psutil here
        return False


def _exc_type(watch: dict, tail: str) -> str | None:
    """The stopped outcome's exc_type (warehouse.vocabulary.VERDICTS), else the exception class
    from the last traceback, else the killing signal's name."""
    if watch["outcome"] in vocab.VERDICTS:
        return vocab.VERDICTS[watch["outcome"]].exc_type
    rc = watch["returncode"]
    if rc == 0:
        return None
    if "Traceback (most recent call last):" in tail:
        after = tail.rsplit("Traceback (most recent call last):", 1)[1]
        for line in reversed(after.strip().splitlines()):
            match = _EXC_LINE.match(line)
            if match:
                return match.group(1).rsplit(".", 1)[-1]
    elif tail.strip():
        # A script that does not compile gets no "Traceback" header, only `File ..., line N`
        # and a last line such as `SyntaxError: ...`; only that last line is trusted.
        match = _EXC_LINE.match(tail.strip().splitlines()[-1])
        if match and match.group(1).endswith(("Error", "Exception", "Interrupt", "Exit")):
            return match.group(1).rsplit(".", 1)[-1]
    if rc is not None and rc < 0:
        return signal.Signals(-rc).name
    return None


def _tail(path: Path, chars: int) -> str:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(max(0, fh.tell() - chars * 4))
        return fh.read().decode("utf-8", "replace")[-chars:]


# --- retrieve ------------------------------------------------------------------------------

def _retrieve(workspace: Path, limits: Limits) -> tuple[bytes | None, str | None]:
    """(the submission's bytes or None, why it was refused or None).

    Read relative to the workspace's descriptor, following no link at any component, a
    regular file of one link only, at most ``max_submission_mb`` (``workspaces.read_beneath``):
    a node that replaced ``submission/`` or the file by a link to the host's files, or left a
    FIFO or a hard link there, submitted nothing."""
    try:
        data = workspaces.read_beneath(workspace, "submission/submission.csv", limits.max_submission_mb * 2**20)
    except workspaces.UnsafeFile as exc:
        return None, str(exc)
    return data, None
