"""Per-node cgroup v2 groups (train/env/cgroup.py), on two grounds:

- a stand-in kernel over a plain directory laid out like a delegated group with the memory and
  pids controllers (the files the kernel makes on mkdir, and rmdir refused while a live process
  is listed): limits written, the node's launcher attached, events read, the group removed, and
  every failure one node's infrastructure record, never its siblings';
- the real cgroup v2 hierarchy of this machine where root may make a group in it: making,
  joining (``_launch.py --cgroup``), moving into the trainer leaf, cgroup.kill and rmdir on the
  kernel itself. A hybrid host's cgroup2 mount offers no memory or pids controller, so there the
  limits themselves (memory.max, pids.max) are not exercised: the test says which it had.
"""
from __future__ import annotations

import dataclasses
import errno
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from train.env import cgroup, sandbox
from train.env.cgroup import CgroupError, NodeCgroup

EVENTS = "low 0\nhigh 0\nmax {max}\noom {oom}\noom_kill {oom_kill}\noom_group_kill 0\n"


class StandInKernel:
    """mkdir makes a group's interface files (those of a kernel with the memory and pids
    controllers enabled for it; the writable ones empty, as a plain file takes a write in
    place where the kernel replaces the value); rmdir is refused (EBUSY) while cgroup.procs lists a live
    process, as the kernel refuses a populated group."""

    def __init__(self, swap: bool = True, kill: bool = True, peak: int | None = 5 * 2**20,
                 oom_kill: int = 0, refuse: set[str] = frozenset()):
        self.swap, self.kill, self.peak, self.oom_kill, self.refuse = swap, kill, peak, oom_kill, refuse
        self.made, self.removed = [], []

    def mkdir(self, path: Path) -> None:
        if path.name in self.refuse or any(path.name.startswith(r) for r in self.refuse):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        os.mkdir(path)
        files = {"cgroup.procs": "", "cgroup.type": "domain\n", "cgroup.controllers": "memory pids\n",
                 "cgroup.subtree_control": "", "memory.max": "", "memory.oom.group": "",
                 "pids.max": "",
                 "memory.events": EVENTS.format(max=3 if self.oom_kill else 0, oom=self.oom_kill,
                                                oom_kill=self.oom_kill)}
        if self.swap:
            files["memory.swap.max"] = ""
        if self.kill:
            files["cgroup.kill"] = ""
        if self.peak is not None:
            files["memory.peak"] = f"{self.peak}\n"
        for name, text in files.items():
            (path / name).write_text(text)
        self.made.append(path)

    def rmdir(self, path: Path) -> None:
        live = [int(p) for p in (path / "cgroup.procs").read_text().split() if _live(int(p))]
        if live:
            raise OSError(errno.EBUSY, "Device or resource busy", str(path))
        shutil.rmtree(path)
        self.removed.append(path)


def _live(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.fixture
def delegated(tmp_path):
    """A directory laid out like a delegated, non-root cgroup v2 group holding no process."""
    group = tmp_path / "delegated"
    group.mkdir()
    for name, text in {"cgroup.procs": "", "cgroup.type": "domain\n", "cgroup.controllers": "memory pids\n",
                       "cgroup.subtree_control": ""}.items():
        (group / name).write_text(text)
    return group


def kernel(monkeypatch, **kw) -> StandInKernel:
    k = StandInKernel(**kw)
    monkeypatch.setattr(cgroup, "_make_group", k.mkdir)
    monkeypatch.setattr(cgroup, "_remove_group", k.rmdir)
    return k


# --- the stand-in kernel -------------------------------------------------------------------

def test_a_node_group_gets_its_limits_and_is_removed_after(monkeypatch, delegated):
    k = kernel(monkeypatch)
    cgroup.trainer_leaf(delegated)
    assert (delegated / "trainer").is_dir()
    assert (delegated / "cgroup.subtree_control").read_text() == "+memory +pids"
    group = NodeCgroup.create(delegated, 3 * 2**30, 68)
    assert group.path.parent == delegated and group.path.name.startswith(f"node-{os.getpid()}-")
    assert {n: (group.path / n).read_text() for n in ("memory.max", "memory.swap.max", "memory.oom.group", "pids.max")} \
        == {"memory.max": str(3 * 2**30), "memory.swap.max": "0", "memory.oom.group": "1", "pids.max": "68"}
    counted = group.finish()
    assert (counted.oom_kills, counted.peak_bytes, counted.warnings) == (0, 5 * 2**20, [])
    assert k.removed == [group.path] and not group.path.exists()


def test_without_swap_accounting_or_memory_peak_the_group_still_serves(monkeypatch, delegated):
    """No memory.swap.max (no swap accounting: nothing is created in its place), no memory.peak
    (a kernel before 5.19: the meter's peak stands)."""
    kernel(monkeypatch, swap=False, peak=None, oom_kill=2)
    group = NodeCgroup.create(delegated, 2**30, 10)
    assert not (group.path / "memory.swap.max").exists()
    counted = group.finish()
    assert (counted.oom_kills, counted.peak_bytes) == (2, None)


def test_a_limit_that_cannot_be_set_removes_the_group_and_says_which(monkeypatch, delegated):
    k = StandInKernel()
    monkeypatch.setattr(cgroup, "_remove_group", k.rmdir)

    def no_pids_controller(path):
        k.mkdir(path)
        (path / "pids.max").unlink()  # the controller is not enabled for the group
    monkeypatch.setattr(cgroup, "_make_group", no_pids_controller)
    with pytest.raises(CgroupError, match=r"cannot open .*/pids\.max \(No such file"):
        NodeCgroup.create(delegated, 2**30, 10)
    assert k.removed and not list(delegated.glob("node-*"))


def test_what_a_node_left_in_its_group_is_killed_before_rmdir(monkeypatch, delegated):
    """Without cgroup.kill (a kernel before 5.14) each listed pid gets SIGKILL until rmdir
    is allowed: a straggler never keeps the group."""
    kernel(monkeypatch, kill=False)
    group = NodeCgroup.create(delegated, 2**30, 10)
    straggler = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        (group.procs).write_text(f"{straggler.pid}\n")
        group.finish()
        assert straggler.wait(timeout=60) == -9 and not group.path.exists()
    finally:
        straggler.kill()
        straggler.wait()


def test_a_group_that_cannot_be_removed_is_said_by_name(monkeypatch, delegated):
    k = kernel(monkeypatch)
    group = NodeCgroup.create(delegated, 2**30, 10)

    def refuse(path):
        raise OSError(errno.EBUSY, "Device or resource busy", str(path))
    monkeypatch.setattr(cgroup, "_remove_group", refuse)
    monkeypatch.setattr(cgroup.time, "sleep", lambda s: None)
    with pytest.raises(CgroupError, match=f"cannot remove the node's cgroup {group.path}"):
        group.finish()
    assert k.removed == []


def test_the_trainer_leaf_is_not_made_at_the_hierarchys_root_and_stale_groups_go(monkeypatch, delegated):
    """The root has no cgroup.type and may hold processes: nothing moves there. Groups of a
    trainer killed with kill -9 (no process left) are removed; one whose process lives stays."""
    k = kernel(monkeypatch)
    (delegated / "cgroup.type").unlink()
    stale, live = delegated / "node-1-0", delegated / "node-2-0"
    k.mkdir(stale)
    k.mkdir(live)
    (live / "cgroup.procs").write_text(f"{os.getpid()}\n")
    cgroup.trainer_leaf(delegated)
    assert not (delegated / "trainer").exists() and not stale.exists() and live.is_dir()


def test_where_the_trainer_leaf_cannot_be_made_nodes_keep_the_meter(monkeypatch, delegated, tmp_path):
    """Delegation found but unusable: one line why, and nodes get no group (caps.cgroup None)."""
    kernel(monkeypatch, refuse={"trainer"})
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"41 31 0:38 / {tmp_path} rw,relatime - cgroup2 cgroup2 rw\n")
    (tmp_path / "membership").write_text("0::/delegated\n")
    directory, why = sandbox.node_cgroups(str(mountinfo), str(tmp_path / "membership"))
    assert directory is None and why.startswith(f"the delegated cgroup v2 group {delegated} cannot hold nodes' groups")
    monkeypatch.setattr(cgroup, "_make_group", StandInKernel().mkdir)
    assert sandbox.node_cgroups(str(mountinfo), str(tmp_path / "membership")) == (delegated, "")
    # a later process of this trainer finds itself in the leaf, and uses the delegated group
    (delegated / "cgroup.subtree_control").write_text("memory pids\n")
    (tmp_path / "membership").write_text("0::/delegated/trainer\n")
    assert sandbox.cgroup_delegation(str(mountinfo), str(tmp_path / "membership")) == (delegated, "")


def test_this_machine_uses_node_groups_only_where_delegation_is_real():
    directory, why = sandbox.cgroup_delegation()
    caps = sandbox.capabilities()
    if directory is None:
        assert caps.cgroup is None and sum(why in w for w in caps.warnings) == 1
    elif caps.cgroup is None:  # delegated, but the trainer leaf could not be made: said once why
        assert sum(f"{directory} cannot hold nodes' groups" in w for w in caps.warnings) == 1
    else:
        assert caps.cgroup == str(directory) and not any("not memory.max" in w for w in caps.warnings)


# --- run_job through the cgroup path, on the stand-in kernel -----------------------------------

def _job(limits, code="open('submission/submission.csv', 'w').write('id,target\\n')\n"):
    from train.env import load_task

    task = load_task("mini-tabular-accuracy")
    return sandbox.SandboxJob(code=code, public_dir=str(task.public_dir), hidden_dirs=(), limits=limits)


@pytest.fixture
def with_groups(monkeypatch, delegated):
    """Nodes of this test get a group under the stand-in delegated directory."""
    real = sandbox._caps
    monkeypatch.setattr(sandbox, "_caps", lambda limits: dataclasses.replace(real(limits), cgroup=str(delegated))
                        if limits.isolate else real(limits))
    return delegated


def test_a_node_is_born_in_its_group_and_the_group_goes_after(monkeypatch, limits, with_groups):
    """The launcher wrote its own pid into the node's cgroup.procs before anything else ran."""
    k = kernel(monkeypatch)
    seen = []
    real_finish = NodeCgroup.finish
    monkeypatch.setattr(NodeCgroup, "finish", lambda self: (seen.append(self.procs.read_text()), real_finish(self))[1])
    result = sandbox.run_job(_job(limits))
    assert result.outcome == "exited" and result.returncode == 0, result.term_tail
    assert result.submission == b"id,target\n"
    assert len(k.made) == 1 and k.removed == k.made and seen[0].strip().isdigit()
    assert result.mem_peak_gi >= round(5 * 2**20 / 2**30, 4)  # memory.peak is a floor under the meter's


def test_an_oom_kill_counted_by_the_kernel_is_the_nodes_memory_limit(monkeypatch, limits, with_groups):
    kernel(monkeypatch, oom_kill=1)
    result = sandbox.run_job(_job(limits))
    assert (result.outcome, result.exc_type) == ("memory_limit", "MemoryLimitError")
    assert "the kernel killed 1 process(es) at the node's memory.max" in result.term_tail


def test_a_group_failure_is_that_nodes_infra_record_and_not_its_siblings(monkeypatch, limits, with_groups):
    """Of three nodes, the second's group cannot be made and the third's cannot be removed:
    each is an infra record naming its group; the first is untouched, and nothing is left."""
    k = StandInKernel()
    calls = []

    def mkdir(path):
        calls.append(path)
        if len(calls) == 2:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        k.mkdir(path)

    def rmdir(path):
        if len(calls) == 3 and not getattr(rmdir, "refused", False):
            rmdir.refused = True
            raise OSError(errno.EBUSY, "Device or resource busy", str(path))
        k.rmdir(path)
    monkeypatch.setattr(cgroup, "_make_group", mkdir)
    monkeypatch.setattr(cgroup, "_remove_group", rmdir)
    first = sandbox.run_job(_job(limits))
    second = sandbox.run_job(_job(limits))
    assert (first.outcome, second.outcome) == ("exited", "infra")
    assert "cannot make the node's cgroup" in second.term_tail and str(calls[1]) in second.term_tail
    third = sandbox.run_job(_job(limits))  # refused once, then removed on the retry
    assert third.outcome == "exited" and not calls[2].exists()
    monkeypatch.setattr(cgroup, "_remove_group", lambda p: (_ for _ in ()).throw(OSError(errno.EBUSY, "busy")))
    monkeypatch.setattr(cgroup.time, "sleep", lambda s: None)
    fourth = sandbox.run_job(_job(limits))
    assert fourth.outcome == "infra" and "cannot remove the node's cgroup" in fourth.term_tail
    assert first.submission == b"id,target\n"
    assert not [p for p in Path(limits.workspace_root).iterdir() if p.is_dir()]  # all four workspaces removed


def test_without_delegation_the_launcher_is_not_wrapped(monkeypatch, limits):
    """Where caps.cgroup is None the argv and the result are those of the meter alone."""
    spawned = []
    real = subprocess.Popen

    def popen(argv, *a, **kw):
        spawned.append(list(argv))
        return real(argv, *a, **kw)
    monkeypatch.setattr(sandbox.subprocess, "Popen", popen)
    monkeypatch.setattr(sandbox, "_caps", lambda limits, real=sandbox._caps: dataclasses.replace(real(limits), cgroup=None))
    result = sandbox.run_job(_job(limits))
    assert result.outcome == "exited" and not any("--cgroup" in a for a in spawned)


# --- the real cgroup v2 hierarchy of this machine ------------------------------------------------

def _real_v2_group():
    """A fresh group in this machine's cgroup2 mount, or skip saying why there is none (a
    skip even under ROLLOUT_REQUIRE_ISOLATION=1: per-node groups are optional, and a CI
    container's cgroupfs is often read-only)."""
    points = [line.split(" - ")[0].split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
              if " - cgroup2 " in line]
    if not points:
        pytest.skip("no cgroup v2 mount here")
    path = Path(points[0]) / f"rollout-test-{os.getpid()}-{time.monotonic_ns()}"
    try:
        os.mkdir(path)
    except OSError as exc:
        pytest.skip(f"cannot make a cgroup v2 group in {points[0]} ({exc.strerror})")
    return path


def test_on_the_real_kernel_a_launcher_joins_its_group_and_cgroup_kill_and_rmdir_end_it():
    path = _real_v2_group()
    group = NodeCgroup(path)
    try:
        code = ("import os, subprocess, sys; subprocess.Popen(['sleep', '600'], start_new_session=True); "
                "print(next(l for l in open('/proc/self/cgroup') if l.startswith('0::')), end='', flush=True); "
                "os.read(0, 1)")
        node = subprocess.Popen([sys.executable, str(sandbox.LAUNCHER), "--cgroup", str(group.procs), "--",
                                 sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = node.stdout.readline()
        assert line.startswith("0::") and line.strip().endswith("/" + path.name), line
        deadline = time.monotonic() + 60
        while len(group.procs.read_text().split()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # the detached sleep is born in the group too
        members = [int(p) for p in group.procs.read_text().split()]
        assert node.pid in members and len(members) == 2
        counted = group.finish()  # cgroup.kill (or SIGKILL each), then rmdir, on the kernel
        assert node.wait(timeout=60) == -9 and not path.exists()
        assert not any(_live(p) for p in members)
        # this hybrid's cgroup2 has no memory controller: no events to read, said in a line
        has_memory = (path.parent / "cgroup.controllers").read_text().split().count("memory")
        assert counted.peak_bytes is None if not has_memory else counted.peak_bytes > 0
    finally:
        if path.exists():
            group.remove()


def test_on_the_real_kernel_a_missing_controller_fails_the_node_and_leaves_no_group():
    """Where the cgroup2 mount lacks the memory controller (a hybrid host), making a node's
    group fails on memory.max, by name, and the group made is removed again."""
    probe = _real_v2_group()
    os.rmdir(probe)
    if "memory" in (probe.parent / "cgroup.controllers").read_text().split():
        pytest.skip("this cgroup2 mount offers the memory controller: the limits would be set")
    with pytest.raises(CgroupError, match=r"memory\.max"):
        NodeCgroup.create(probe.parent, 2**30, 10)
    assert not list(probe.parent.glob(f"node-{os.getpid()}-*"))  # ours only: others may work beside


def test_on_the_real_kernel_the_trainer_leaf_takes_the_groups_processes():
    """A group holding a process: trainer_leaf moves it into <group>/trainer (the kernel's
    no-internal-processes rule), and removes a stale node group beside it."""
    path = _real_v2_group()
    sleeper = subprocess.Popen([sys.executable, str(sandbox.LAUNCHER), "--cgroup", str(path / "cgroup.procs"),
                                "--", "/bin/sleep", "600"])
    try:
        deadline = time.monotonic() + 60
        while str(sleeper.pid) not in (path / "cgroup.procs").read_text().split() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.mkdir(path / "node-1-0")  # a killed trainer's, empty
        cgroup.trainer_leaf(path, controllers=())  # the limits' controllers are not on this mount
        assert (path / "cgroup.procs").read_text().split() == []
        assert (path / "trainer" / "cgroup.procs").read_text().split() == [str(sleeper.pid)]
        assert not (path / "node-1-0").exists()
    finally:
        sleeper.kill()
        sleeper.wait()
        for leaf in (path / "trainer", path / "node-1-0", path):
            for _ in range(200):
                try:
                    os.rmdir(leaf)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
