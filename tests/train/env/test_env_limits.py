"""Per-node limits: memory of the whole tree (tmpfs included), the workspace's disk quota,
verdicts that do not depend on the machine's load, and the sweep of a killed run's workspaces."""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from train.env import capabilities, evaluate_code, load_task
from tests.isolation import lacking

TASK = "mini-tabular-accuracy"


@pytest.fixture
def small(limits):
    """256 MiB of memory, 100 MiB of disk; files may be large (the quota, not RLIMIT_FSIZE, cuts)."""
    return dataclasses.replace(limits, mem_gi=0.25, disk_gi=0.1, fsize_mb=512)


def _verdict(record):
    return record["status"], record["exc_type"], record["reward"]


def test_forked_children_are_counted_together(case, small):
    record = evaluate_code(load_task(TASK), case("fork_memory.py"), limits=small)
    assert _verdict(record) == ("crashed", "MemoryLimitError", -0.5), record["term_tail"]
    assert record["mem_peak_gi"] > small.mem_gi  # recorded at the sample that stopped it
    assert record["outcome"] == "memory_limit" and record["limits"]["mem_gi"] == small.mem_gi


def test_files_on_the_nodes_tmpfs_are_memory(case, small):
    if not capabilities().bwrap:
        lacking("the node's private /dev/shm and /tmp are bubblewrap's")
    record = evaluate_code(load_task(TASK), case("shm_writer.py"), limits=small)
    assert _verdict(record) == ("crashed", "MemoryLimitError", -0.5), record["term_tail"]
    assert record["mem_peak_gi"] > small.mem_gi


@pytest.mark.parametrize("kind", ["sysv_attached", "sysv_detached", "shared_anonymous"])
def test_shared_memory_is_the_nodes_memory(case, small, kind):
    """300 MiB in SysV segments (held by three children, or by none) or in shared anonymous
    mappings split over children, under a 256 MiB limit."""
    if kind.startswith("sysv") and not capabilities().namespaces:
        lacking("a node's SysV segments are counted in its own IPC namespace")
    record = evaluate_code(load_task(TASK), case("shared_memory.py").replace("KIND", kind), limits=small)
    assert _verdict(record) == ("crashed", "MemoryLimitError", -0.5), record["term_tail"][-300:]
    assert record["mem_peak_gi"] > small.mem_gi


@pytest.mark.parametrize("allow_list", [True, False], ids=["bubblewrap", "fallback"])
def test_a_nodes_sysv_segments_die_with_it(small, allow_list):
    """A segment left attached to no process, by a node that then exits: gone from the host."""
    if not capabilities().namespaces or (allow_list and not capabilities().bwrap):
        lacking("an IPC namespace of the node's own")
    key = int.from_bytes(os.urandom(3), "big") + 1
    code = ("import ctypes\nlibc = ctypes.CDLL(None)\nlibc.shmat.restype = ctypes.c_void_p\n"
            f"shmid = libc.shmget({key}, 2**20, 0o1000 | 0o600)\naddr = libc.shmat(shmid, None, 0)\n"
            "ctypes.memset(addr, 1, 2**20)\nlibc.shmdt(ctypes.c_void_p(addr))\nprint('left', shmid)\n")
    limits = dataclasses.replace(small, allow_list=allow_list, isolate=True)
    record = evaluate_code(load_task(TASK), code, limits=limits)
    assert record["status"] == "no_submission" and "left" in record["term_tail"], record["term_tail"][-300:]
    keys = [int(line.split()[0]) for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]]
    assert key not in keys


def test_many_files_under_the_per_file_limit_hit_the_disk_quota(case, small):
    record = evaluate_code(load_task(TASK), case("disk_writer.py"), limits=small)
    assert _verdict(record) == ("crashed", "DiskLimitError", -0.5), record["term_tail"]
    assert record["outcome"] == "disk_limit" and record["disk_peak_gi"] > small.disk_gi == record["limits"]["disk_gi"]
    assert list(Path(small.workspace_root).glob("node-*")) == []  # its 180 MiB went with it


@pytest.mark.parametrize("levels, name", [(3000, "d"), (30, "n" * 250)], ids=["3000_levels", "long_names"])
def test_files_past_path_max_count_against_the_quota(small, levels, name):
    """180 MiB written at the bottom of a path longer than PATH_MAX, which no path reaches."""
    code = ("import os, time\nfor _ in range(LEVELS):\n    os.mkdir('NAME')\n    os.chdir('NAME')\n"
            "for i in range(3):\n    with open(f'part{i}.bin', 'wb') as fh:\n"
            "        for _ in range(60):\n            fh.write(b'x' * 2**20)\n"
            "print(len(os.getcwd()), flush=True)\ntime.sleep(60)\n").replace("LEVELS", str(levels)).replace("NAME", name)
    record = evaluate_code(load_task(TASK), code, limits=small)
    assert _verdict(record) == ("crashed", "DiskLimitError", -0.5), record["term_tail"][-300:]
    assert list(Path(small.workspace_root).glob("node-*")) == []


def test_a_deleted_file_held_open_still_counts(case, small):
    record = evaluate_code(load_task(TASK), case("deleted_file_writer.py"), limits=small)
    assert _verdict(record) == ("crashed", "DiskLimitError", -0.5), record["term_tail"]


def test_a_node_under_its_limits_is_not_stopped(small):
    code = "import os\nopen('a.bin', 'wb').write(b'x' * 2**20 * 40)\nhold = b'y' * 2**20 * 100\n"
    record = evaluate_code(load_task(TASK), code, limits=small)
    assert _verdict(record) == ("no_submission", None, -0.5), record["term_tail"]
    assert record["outcome"] == "exited" and 0.03 < record["disk_peak_gi"] < small.disk_gi


# stdout or stderr (a file on the host) and 60 MiB of files: under the quota apart, over it together
PRINT = "for _ in range(60):\n    sys.{}.buffer.write(b'o' * 2**20)\nsys.{}.flush()\n"
OUTPUT_CASES = {
    "stdout": PRINT.format("stdout", "stdout"),
    "stderr": PRINT.format("stderr", "stderr"),
    "stdout_of_a_child": f"subprocess.run([sys.executable, '-c', {'import sys' + chr(10) + PRINT.format('stdout', 'stdout')!r}])\n",
}


@pytest.mark.parametrize("stream", sorted(OUTPUT_CASES))
def test_what_a_node_prints_counts_against_its_disk_quota(small, stream):
    code = ("import subprocess, sys, time\nopen('files.bin', 'wb').write(b'f' * 2**20 * 60)\n"
            + OUTPUT_CASES[stream] + "time.sleep(60)\n")
    record = evaluate_code(load_task(TASK), code, limits=small)
    assert _verdict(record) == ("crashed", "DiskLimitError", -0.5), record["term_tail"][-300:]
    assert len(record["term_tail"]) <= small.term_tail_chars  # the host keeps a tail only
    assert list(Path(small.workspace_root).glob("node-*")) == []


# --- verdicts under load ----------------------------------------------------------------------

LOAD_CASES = {  # case: (limits changed, the verdict on a quiet machine and a loaded one)
    "timeout_busy_loop.py": ({"timeout_s": 1.5}, ("timeout", "TimeoutError", -0.5)),
    "idle_sleep.py": ({"idle_window_s": 2}, ("crashed", "CpuIdleError", -0.2)),
    # one second of its own CPU: on 2 cores shared with 8 busy processes, over 4 s of wall clock
    "cpu_work.py": ({"timeout_s": 2.5}, ("no_submission", None, -0.5)),
    "fork_memory.py": ({"mem_gi": 0.25}, ("crashed", "MemoryLimitError", -0.5)),
}


@pytest.fixture
def cpu_load():
    """Two cores and eight busy processes on them, the node too: a loaded 2-core CI machine,
    on any machine (the node and the load inherit this process's CPU affinity)."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, sorted(allowed)[:2])
    # each in a session of its own, as the node is: with autogroup scheduling a session shares
    # the CPU with each other session, so 8 busy processes of one session would take half
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(8)]
    try:
        yield busy
    finally:
        os.sched_setaffinity(0, allowed)
        for proc in busy:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("name", sorted(LOAD_CASES))
def test_a_verdict_does_not_depend_on_the_machines_load(case, limits, cpu_load, name):
    changes, expected = LOAD_CASES[name]
    record = evaluate_code(load_task(TASK), case(name), limits=dataclasses.replace(limits, **changes))
    assert all(p.poll() is None for p in cpu_load)  # the load was there throughout
    assert _verdict(record) == expected, {k: record[k] for k in ("exec_time", "cpu_util_mean", "term_tail")}


def test_every_status_under_load(case, limits, cpu_load):
    # the status suite's six nodes (test_env_sandbox.py), two at a time, on a loaded machine:
    # each status and reward as on a quiet one, the ok node graded alike
    from tests.train.env.test_env_sandbox import every_status, verdicts

    records = every_status(case, limits)
    assert all(p.poll() is None for p in cpu_load)
    verdicts(records)
    assert records["ok"]["humanrank"] > 0


@pytest.mark.parametrize("name", sorted(LOAD_CASES))
def test_the_same_verdicts_on_a_quiet_machine(case, limits, name):
    changes, expected = LOAD_CASES[name]
    record = evaluate_code(load_task(TASK), case(name), limits=dataclasses.replace(limits, **changes))
    assert _verdict(record) == expected, record["term_tail"]


# --- a killed run's workspaces ----------------------------------------------------------------

SLEEPER = """
import sys
from train.env import Limits, evaluate_code, load_task
evaluate_code(load_task("mini-tabular-accuracy"), "import time\\ntime.sleep(600)\\n",
              limits=Limits(timeout_s=900, idle_window_s=900, workspace_root=sys.argv[1]))
"""


def _owner_with_a_node(root: Path) -> tuple[subprocess.Popen, Path]:
    """A process that runs one node (sleeping) under ``root``, and that node's workspace."""
    owner = subprocess.Popen([sys.executable, "-c", SLEEPER, str(root)], start_new_session=True)
    deadline = time.monotonic() + 120
    while not list(root.glob("node-*/ws/solution.py")) and time.monotonic() < deadline and owner.poll() is None:
        time.sleep(0.1)
    [solution] = root.glob("node-*/ws/solution.py")
    return owner, solution.parent.parent


def test_the_next_run_removes_a_killed_runs_workspaces(limits):
    root = Path(limits.workspace_root)
    owner, workspace = _owner_with_a_node(root)
    try:
        evaluate_code(load_task(TASK), "print('neighbour')\n", limits=limits)
        assert workspace.is_dir()  # its owner lives: a neighbour's sweep leaves it
    finally:
        os.killpg(owner.pid, signal.SIGKILL)  # kill -9 of the run (its node dies with it)
        owner.wait()
    assert workspace.is_dir()  # nothing removed it yet
    record = evaluate_code(load_task(TASK), "print('next run')\n", limits=limits)
    assert record["returncode"] == 0
    assert not workspace.exists()
    token = workspace.name.split("-")[1]
    assert not (root / f"owner-{token}.lock").exists()


def test_a_machine_too_loaded_to_judge_a_node_is_infrastructure(case, limits, cpu_load):
    """The wall clock's backstop: past wall_factor x timeout_s of wall clock a node not yet at
    its limit on its own clock is the machine's failure, not the node's timeout."""
    record = evaluate_code(load_task(TASK), case("cpu_work.py"),
                           limits=dataclasses.replace(limits, timeout_s=2.5, wall_factor=1.0))
    assert _verdict(record) == ("crashed", "InfrastructureError", -1.0), record["term_tail"]
    assert "too loaded to judge" in record["term_tail"]


@pytest.mark.parametrize("run, wait, expected", [
    (1.0, 0.0, 1.0),  # one thread, a quiet machine: the wall clock
    (0.0, 0.0, 1.0),  # asleep: the wall clock
    (0.2, 0.8, 0.2),  # one thread, runnable throughout, a fifth of a core: the CPU it got
    (0.1, 0.4, 0.6),  # half asleep, starved while awake: the wall clock less its wait
    (1.0, 1.0, 0.5),  # two threads, each half starved: half
    (2.0, 62.0, 1.0),  # 64 threads on the 2 cores alone (a fork bomb): it waits on itself only
])
def test_the_node_clock_is_slowed_only_by_others(run, wait, expected):
    from train.env.meter import node_seconds

    assert node_seconds(1.0, run, wait, cores=2) == pytest.approx(expected)
