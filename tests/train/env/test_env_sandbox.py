"""Hand-written solutions for every status, and hostile ones that must leave the machine healthy."""
from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from train.env import LocalExecutor, capabilities, evaluate, evaluate_code, load_task
from tests.isolation import lacking

def fenced(code: str) -> str:
    return f"Plan.\n```python\n{code}```\n"


def _assert_invariants(record):
    ok = record["status"] == "ok"
    assert record["is_buggy"] is (not ok)
    assert (record["source"] == "grade") is (record["test_metric"] is not None)
    assert (record["oriented"] is None) is (record["test_metric"] is None)
    assert 0 <= record["reward"] <= 1 if ok else record["reward"] in (-0.5, -0.2, -1.0)


def every_status(case, limits) -> dict:
    """One node of each status on the bundled accuracy task: its record by status."""
    task = load_task("mini-tabular-accuracy")
    completions = {
        "ok": fenced((task.root / "reference_solution.py").read_text()),
        "crashed": fenced(case("crashed.py")),
        "no_code": case("completion_unclosed_fence.md"),
        "no_submission": fenced(case("no_submission.py")),
        "invalid_submission": fenced(case("invalid_submission.py")),
        "idle": fenced(case("idle_sleep.py")),
    }
    # a 5 s idle window: long against any stall of the working nodes, short against the sleeper's 60 s
    limits = dataclasses.replace(limits, idle_window_s=5)
    return dict(zip(completions, evaluate(task, list(completions.values()), LocalExecutor(2), limits)))


def verdicts(records: dict) -> dict:
    """(status, exc_type, reward) by status; the reward of the ok node is its humanrank."""
    got = {k: (r["status"], r["exc_type"], r["reward"]) for k, r in records.items()}
    assert got == {
        "ok": ("ok", None, records["ok"]["humanrank"]),
        "crashed": ("crashed", "ValueError", -0.5),
        "no_code": ("no_code", None, -0.5),
        "no_submission": ("no_submission", None, -0.5),
        "invalid_submission": ("invalid_submission", None, -0.5),
        "idle": ("crashed", "CpuIdleError", -0.2),
    }, {k: r["term_tail"][-300:] for k, r in records.items()}
    return got


def test_every_status_gets_its_reward(case, limits):
    task = load_task("mini-tabular-accuracy")
    records = every_status(case, limits)
    verdicts(records)
    humanrank = records["ok"]["humanrank"]
    ok = records["ok"]
    reference = json.loads((task.root / "scores.json").read_text())["reference"]  # the generator's score
    assert ok["test_metric"] == pytest.approx(reference, abs=1e-9) and ok["oriented"] == ok["test_metric"]
    assert humanrank == pytest.approx(_humanrank_by_hand(task, ok["test_metric"]))
    assert records["no_code"]["code"] == "" and records["no_code"]["exec_time"] is None
    assert records["idle"]["exec_time"] < 15  # killed after the 5 s window, not the 20 s timeout
    assert set(ok["exec_timings"]) == {"pending", "stage", "exec", "retrieve"}
    assert ok["mem_peak_gi"] > 0.01 and ok["cpu_util_peak"] > 10
    for record in records.values():
        _assert_invariants(record)


def _humanrank_by_hand(task, score):
    board = task.leaderboard_scores()
    return (sum(s < score for s in board) + 0.5 * sum(s == score for s in board)) / len(board)


def test_timeout(case, limits):
    record = evaluate_code(load_task("mini-tabular-accuracy"), case("timeout_busy_loop.py"),
                           limits=dataclasses.replace(limits, timeout_s=1.5))
    assert (record["status"], record["exc_type"], record["reward"]) == ("timeout", "TimeoutError", -0.5)
    # the node's clock never runs ahead of the wall clock; on a loaded machine it runs slower
    # (test_env_limits.py), so the wall time has no upper bound here
    assert record["exec_time"] >= 1.5


def test_a_script_that_does_not_compile_names_syntax_error(case, limits):
    """No "Traceback" header is printed for a SyntaxError in the main script itself."""
    record = evaluate_code(load_task("mini-tabular-accuracy"), case("syntax_error.py"), limits=limits)
    assert (record["status"], record["exc_type"], record["reward"]) == ("crashed", "SyntaxError", -0.5)
    assert "SyntaxError" in record["term_tail"]


def test_sandbox_failure_is_infrastructure(case, limits, tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    record = evaluate_code(load_task("mini-tabular-accuracy"), case("crashed.py"),
                           limits=dataclasses.replace(limits, workspace_root=str(not_a_dir)))
    assert (record["status"], record["exc_type"], record["reward"]) == ("crashed", "InfrastructureError", -1.0)


def _poison(step: str, monkeypatch) -> None:
    """Make ``step`` of the node whose code says "poison" raise, as a node-provoked failure would."""
    from train.env import node, sandbox, workspaces

    def poisoned(code: str) -> None:
        if "poison" in code:
            raise RecursionError(f"maximum recursion depth exceeded ({step})")

    def wrap(module, name, code_of):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, **k: (poisoned(code_of(*a)), real(*a, **k))[1])

    solution = lambda ws: (Path(ws) / "solution.py").read_text()  # noqa: E731
    if step == "stage":
        wrap(sandbox, "_stage", lambda job, base: job.code)
    elif step == "retrieve":
        wrap(sandbox, "_retrieve", lambda ws, limits: solution(ws))
    elif step == "cleanup":
        wrap(workspaces, "remove_tree", lambda base: solution(Path(base) / "ws") if Path(base, "ws").is_dir() else "")
    elif step == "grade":
        wrap(node, "grade_isolated", lambda task, data: (data or b"").decode())


@pytest.mark.parametrize("step", ["stage", "retrieve", "cleanup", "grade"])
def test_one_nodes_failure_is_its_own_record_and_its_siblings_stand(case, limits, monkeypatch, step):
    task = load_task("mini-tabular-accuracy")
    poisoned = case("copy_sample_submission.py").replace("print(", "open('submission/submission.csv', 'a')"
                                                          ".write('# poison\\n')\nprint(")
    honest = (task.root / "reference_solution.py").read_text()
    _poison(step, monkeypatch)
    records = evaluate(task, [fenced(poisoned), fenced(honest)], LocalExecutor(2), limits)
    assert [(r["status"], r["exc_type"], r["reward"]) for r in records] == [
        ("crashed", "InfrastructureError", -1.0), ("ok", None, records[1]["humanrank"])], \
        [r["term_tail"][-300:] for r in records]
    assert step in records[0]["term_tail"] and "RecursionError" in records[0]["term_tail"]
    if step != "cleanup":
        assert list(Path(limits.workspace_root).glob("node-*")) == []


def test_private_answers_are_out_of_reach(case, limits):
    if not capabilities().namespaces:
        lacking("no mount namespace here: the sandbox warns that answers are readable")
    task = load_task("mini-tabular-accuracy")
    code = case("read_private_answers.py").replace("ANSWERS_PATH", str(task.answers_path))
    record = evaluate_code(task, code, limits=limits)
    assert record["status"] == "crashed" and record["exc_type"] in ("PermissionError", "FileNotFoundError")
    assert task.answers_path.read_text().startswith("id,target")  # the host still sees them


def test_no_network_even_to_the_hosts_loopback(case, limits):
    if not capabilities().namespaces:
        lacking("no network namespace here")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        code = case("open_socket.py").replace("PORT", str(server.getsockname()[1]))
        record = evaluate_code(load_task("mini-tabular-accuracy"), code, limits=limits)
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected
    assert record["status"] == "crashed"
    assert record["exc_type"] in ("ConnectionRefusedError", "OSError", "TimeoutError")


def _node_processes_left():
    """Processes left under the uids of this process's nodes (train.env.sandbox gives each
    process 100 of its own: another test run's nodes on the machine are not this test's)."""
    from train.env.sandbox import UID_BASE

    mine = range(UID_BASE + os.getpid() % 1000 * 100, UID_BASE + os.getpid() % 1000 * 100 + 100)
    return [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real in mine]


def _processes_under(root: str) -> list:
    """Processes whose working directory is under `root` (a node's is its workspace)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.cwd().startswith(root):
                found.append(proc)
        except (psutil.Error, OSError):
            pass
    return found


def test_fork_bomb_is_contained_and_cleaned_up(case, limits):
    # the bomb's 2 s are on its own clock; on a loaded 2-core machine they took more than the
    # default 10x in wall time once, and the node was stopped as starved (infra, -1.0)
    record = evaluate_code(load_task("mini-tabular-accuracy"), case("fork_bomb.py"),
                           limits=dataclasses.replace(limits, timeout_s=2, wall_factor=100))
    assert record["status"] in ("timeout", "crashed") and record["reward"] == -0.5
    time.sleep(0.2)
    assert _processes_under(limits.workspace_root) == []
    assert _node_processes_left() == []


def test_detached_children_are_killed(case, limits):
    if not capabilities().uid_switch:
        lacking("needs a uid of its own to find processes that left the group")
    record = evaluate_code(load_task("mini-tabular-accuracy"), case("escape_session.py"), limits=limits)
    assert record["status"] == "no_submission"
    time.sleep(0.2)
    assert _node_processes_left() == []


def test_memory_filler_hits_the_limit(case, limits):
    limits = dataclasses.replace(limits, mem_gi=1)
    record = evaluate_code(load_task("mini-tabular-accuracy"), case("fill_memory.py"), limits=limits)
    assert (record["status"], record["exc_type"], record["reward"]) == ("crashed", "MemoryError", -0.5)
    assert 0.5 < record["mem_peak_gi"] < limits.mem_gi + 0.1, {k: v for k, v in record.items() if k != "code"}
    assert psutil.virtual_memory().available > 2 * 2**30


# A trainer holding a model spawns its nodes: run from a parent whose peak RSS is 1.5 GiB.
BIG_PARENT = """
import json, sys
from train.env import Limits, evaluate_code, load_task

ballast = bytearray(1536 * 2**20)
for i in range(0, len(ballast), 4096):
    ballast[i] = 1  # resident
limits = Limits(**json.loads(sys.argv[1]))
record = evaluate_code(load_task("mini-tabular-accuracy"), "print('hello')\\n", limits=limits)
print(json.dumps([record["status"], record["mem_peak_gi"]]))
"""


def test_a_nodes_memory_peak_is_not_its_spawners(limits):
    """The kernel starts a child's rusage peak at the peak RSS of the process it was forked from;
    a node that prints one line must not record the trainer's 1.5 GiB as its own."""
    out = subprocess.run([sys.executable, "-c", BIG_PARENT, json.dumps(dataclasses.asdict(limits))],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    status, peak = json.loads(out.stdout.strip().splitlines()[-1])
    assert status == "no_submission" and peak < 0.5, (status, peak)


def test_huge_file_is_cut_at_the_size_limit(case, limits):
    record = evaluate_code(load_task("mini-tabular-accuracy"), case("huge_file.py"), limits=limits)
    assert (record["status"], record["exc_type"], record["reward"]) == ("crashed", "OSError", -0.5)
    assert "File too large" in record["term_tail"]
    assert list(Path(limits.workspace_root).glob("node-*")) == []  # the workspace is gone


def test_environment_is_scrubbed(limits, monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    code = ("import os, sys\nprint(sorted(os.environ))\n"
            "sys.exit(3 if 'SECRET_TOKEN' in os.environ else 0)\n")
    record = evaluate_code(load_task("mini-tabular-accuracy"), code, limits=limits)
    assert record["returncode"] == 0 and "SECRET_TOKEN" not in record["term_tail"]


@pytest.mark.parametrize("allow_list", [True, False])
def test_a_node_sees_nothing_outside_its_allow_list(case, limits, tmp_path, allow_list):
    """Private answers planted in /tmp, the home directory, next to the warehouse and in
    another tasks root; the warehouse file and a checkpoint directory; the bundled tasks'
    answers in their data dir: a node that walks the whole filesystem finds none of them."""
    if not capabilities().bwrap:
        lacking("no bubblewrap here: the sandbox warns and falls back to its deny-list")
    import json
    import tempfile
    import uuid

    from tests.train.env.twins import build_twin

    token = f"planted-{uuid.uuid4().hex[:12]}"
    home = Path.home()  # the conftest's isolated HOME
    system_tmp = Path(tempfile.mkdtemp(prefix=f"{token}-"))
    planted = [system_tmp / "answers.csv", home / token / "answers.csv",
               tmp_path / "warehouse" / f"{token}-answers.csv",
               tmp_path / f"other-root-{token}" / "mini" / "private" / "answers.csv"]
    for path in planted:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("id,target\n1,a\n")
    warehouse = tmp_path / "warehouse" / "warehouse.duckdb"
    warehouse.write_bytes(b"DUCK")
    checkpoints = tmp_path / "checkpoints" / token
    checkpoints.mkdir(parents=True)
    bundled = load_task("mini-tabular-accuracy").answers_path
    build_twin(tmp_path / f"tasks-{token}", "spaceship-titanic")
    task = load_task("spaceship-titanic", tmp_path / f"tasks-{token}")
    targets = [*map(str, planted), str(warehouse), str(checkpoints), str(bundled), str(task.answers_path)]
    code = (case("hunt_for_answers.py").replace("PLANTED_JSON", json.dumps(targets)).replace("TOKEN_VALUE", token)
            .replace("DEADLINE_S", "120" if allow_list else "8"))  # 8 s walked under load once: not enough
    try:
        record = evaluate_code(task, code, limits=dataclasses.replace(limits, allow_list=allow_list,
                                                                      timeout_s=240 if allow_list else limits.timeout_s))
        assert all(Path(t).exists() for t in targets)  # the host still has every one of them
    finally:
        import shutil
        shutil.rmtree(system_tmp, ignore_errors=True)
    lines = {line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1])
             for line in record["term_tail"].splitlines() if line.split(" ", 1)[0] in ("FOUND", "READABLE", "INPUT", "COMPLETE")}
    why = {k: record[k] for k in ("status", "exc_type", "exec_time", "cpu_util_mean", "term_tail")}
    assert record["returncode"] == 0, why
    assert lines["INPUT"] == sorted(p.name for p in task.public_dir.iterdir())  # public data is there
    if allow_list:
        assert lines["COMPLETE"] is True  # it walked every directory it could see
        assert lines["FOUND"] == [] and lines["READABLE"] == []
    else:  # the deny-list fallback hides its own tasks root; the bundled answers' data dir is 0700
        assert str(bundled) not in lines["READABLE"] and str(task.answers_path) not in lines["READABLE"]


@pytest.mark.parametrize("allow_list", [True, False])
def test_a_node_sees_the_proc_of_its_own_pid_namespace(limits, allow_list):
    """/proc is that of the node's pid namespace: /proc/<getpid()>/ is the solution itself.
    CUDA's driver reads it, and under the host's /proc getpid()'s small number named another
    process (the GPU machine's nodes failed cudaGetDeviceCount, error 304, in the deny-list
    sandbox)."""
    caps = capabilities()
    if not caps.namespaces or (allow_list and not caps.bwrap):
        lacking("no pid namespace here" if not caps.namespaces else "no bubblewrap here")
    code = ("import os\nprint('PROC', open('/proc/self/stat').read().split()[0], os.getpid(),\n"
            "      b'solution.py' in open(f'/proc/{os.getpid()}/cmdline', 'rb').read(), flush=True)\n")
    record = evaluate_code(load_task("mini-tabular-accuracy"), code,
                           limits=dataclasses.replace(limits, allow_list=allow_list))
    line = next(line for line in record["term_tail"].splitlines() if line.startswith("PROC "))
    stat_pid, pid, own = line.split()[1:]
    assert stat_pid == pid and own == "True", record["term_tail"]


def test_a_node_can_ask_who_it_is(limits):
    """The node's uid has no passwd entry; getpass.getuser() (torch.compile's cache dir, on the
    GPU machine a KeyError that crashed every GPU node) answers from the environment."""
    code = "import getpass\nprint('USER', getpass.getuser(), flush=True)\n"
    record = evaluate_code(load_task("mini-tabular-accuracy"), code, limits=limits)
    assert record["returncode"] == 0 and "USER node" in record["term_tail"], record["term_tail"]


def test_the_sweep_after_a_node_exits_spares_a_process_that_reuses_its_pid():
    """After a node's process is reaped its pid may name a new process: another node's bwrap,
    leader of its own group. The straggler sweep must not kill that tree or that group; the
    sweep of a live node (tree=True) does kill them, the control."""
    import subprocess

    from train.env import sandbox

    def neighbour():
        proc = subprocess.Popen(["bash", "-c", "sleep 60 & sleep 60 & wait"], start_new_session=True)
        deadline = time.monotonic() + 10
        while len(psutil.Process(proc.pid).children()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        return proc, psutil.Process(proc.pid).children()

    proc, children = neighbour()
    try:
        sandbox._kill_all(proc.pid, None, psutil, tree=False)  # as if proc.pid were a reaped node's
        time.sleep(0.2)
        assert proc.poll() is None and all(c.is_running() and c.status() != "zombie" for c in children)
    finally:
        sandbox._kill_all(proc.pid, None, psutil)  # the control: a live node's sweep kills them all
        proc.wait(timeout=10)
        gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive


def test_a_hidden_dir_inside_a_bound_prefix_is_covered(tmp_path):
    """A tasks root inside the interpreter's prefix would be bound with it: an empty read-only
    tmpfs goes over it; one outside every bind needs none."""
    import sys

    from train.env import bwrap

    inside, outside = str(Path(sys.prefix) / "tasks-root"), str(tmp_path / "elsewhere")
    argv = bwrap.argv(workspace=tmp_path / "ws", public_dir=str(tmp_path / "public"), launcher="/l.py",
                      config="/c.json", pythons=[sys.executable], hidden=(inside, outside))
    covered = [argv[i + 1] for i, a in enumerate(argv) if a == "--tmpfs" and argv[i + 3:i + 4] == [argv[i + 1]]]
    assert covered == [inside]
    assert argv[argv.index(inside) + 1:argv.index(inside) + 3] == ["--remount-ro", inside]


def test_a_node_uid_is_held_by_one_node_on_the_machine_at_a_time(monkeypatch):
    """Two runs whose pids agree mod 1000 start from the same uid: the second takes the next
    free one while the first node holds it, and that uid again once it is given back."""
    import itertools
    import subprocess
    import sys

    from train.env import sandbox

    monkeypatch.setattr(sandbox, "_uid_counter", itertools.count(7))
    uid, lease = sandbox.lease_uid()
    other = ("import itertools, os; from train.env import sandbox; "
             f"os.getpid = lambda: {os.getpid()}; sandbox._uid_counter = itertools.count(7); "
             "print(sandbox.lease_uid()[0])")

    def lease_elsewhere() -> int:
        out = subprocess.run([sys.executable, "-c", other], capture_output=True, text=True, check=True)
        return int(out.stdout)

    try:
        assert uid == sandbox.UID_BASE + os.getpid() % 1000 * 100 + 7
        assert lease_elsewhere() == uid + 1  # the same start, another process: not the held uid
        monkeypatch.setattr(sandbox, "_uid_counter", itertools.count(7))
        second, second_lease = sandbox.lease_uid()  # this process's next node too
        os.close(second_lease)
        assert second == uid + 1
    finally:
        os.close(lease)
    assert lease_elsewhere() == uid  # given back


@pytest.mark.parametrize("stopped_by", ["idle", "timeout"])
@pytest.mark.parametrize("allow_list", [True, False], ids=["bubblewrap", "fallback"])
def test_a_node_the_sandbox_kills_leaves_no_launcher_traceback(limits, allow_list, stopped_by):
    """The sandbox SIGKILLs the solution; the launcher reaps it and dies the same way, quietly."""
    if allow_list and not capabilities().bwrap:
        lacking("bubblewrap")
    code = "import time\nprint('before', flush=True)\n" + (
        "time.sleep(120)\n" if stopped_by == "idle" else "while True:\n    pass\n")
    # each verdict far from the other: a sleeper idle after 1 s of 20, a busy loop out of time at 2 s
    window, timeout = (1, 20) if stopped_by == "idle" else (60, 2)
    limits = dataclasses.replace(limits, allow_list=allow_list, idle_window_s=window, timeout_s=timeout)
    record = evaluate_code(load_task("mini-tabular-accuracy"), code, limits=limits)
    expected = ("crashed", "CpuIdleError") if stopped_by == "idle" else ("timeout", "TimeoutError")
    assert (record["status"], record["exc_type"]) == expected, record["term_tail"]
    assert "Traceback" not in record["term_tail"] and record["term_tail"].strip() == "before"


HYBRID = """31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / MOUNT rw,relatime - cgroup2 cgroup2 rw
"""


def _delegation(tmp_path, mountinfo: str, membership: str, controllers: str | None, group: str = "node group"):
    """cgroup_delegation over a mountinfo and /proc/self/cgroup as given, the cgroup2 mount at
    tmp_path/"v2 mount" (a space: mountinfo writes it \\040), our group's controllers as given."""
    from train.env.sandbox import cgroup_delegation

    point = tmp_path / "v2 mount"
    (point / group).mkdir(parents=True, exist_ok=True)
    if controllers is not None:
        (point / group / "cgroup.controllers").write_text(controllers)
        for name in ("cgroup.subtree_control", "cgroup.procs"):
            (point / group / name).touch()
    (tmp_path / "mountinfo").write_text(mountinfo.replace("MOUNT", str(point).replace(" ", "\\040")))
    (tmp_path / "cgroup").write_text(membership)
    return cgroup_delegation(str(tmp_path / "mountinfo"), str(tmp_path / "cgroup")), point / group


def test_whether_a_cgroup_v2_group_is_delegated_is_read_from_the_mounts_and_our_group(tmp_path):
    """The reasons nodes get no cgroup, each from a layout of its own: v1 only, no 0:: line,
    a hybrid's v2 holding no memory controller (this machine's: hugetlb only), a group outside
    the mount, one whose files we may not write; and the group found where it would do."""
    v1_only = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    assert _delegation(tmp_path, v1_only, "4:memory:/x\n0::/\n", "memory pids")[0] == \
        (None, "no cgroup v2 hierarchy is mounted (cgroup v1 only)")
    (got, why), _ = _delegation(tmp_path, HYBRID, "4:memory:/x\n", "memory pids")
    assert got is None and "no 0:: line" in why
    (got, why), group = _delegation(tmp_path, HYBRID, "0::/node group\n", "hugetlb\n")
    assert (got, why) == (None, f"the cgroup v2 group {group} offers hugetlb, not memory and pids "
                                "(a cgroup v1 or hybrid host keeps them in v1)")
    (got, why), group = _delegation(tmp_path, HYBRID, "0::/node group\n", "cpu memory\n")
    assert got is None and why.endswith("not pids (a cgroup v1 or hybrid host keeps them in v1)")
    (got, why), _ = _delegation(tmp_path, HYBRID.replace(" / MOUNT", " /elsewhere MOUNT"), "0::/node group\n", "memory pids")
    assert got is None and "outside every mounted cgroup2" in why
    (got, why), group = _delegation(tmp_path, HYBRID, "0::/node group\n", "cpu memory pids\n")
    assert (got, why) == (group, "")  # mounted path unescaped, our group's files writable
    if os.geteuid() != 0:  # root writes any file of a read-write mount
        os.chmod(group / "cgroup.subtree_control", 0o444)
        (got, why), _ = _delegation(tmp_path, HYBRID, "0::/node group\n", "cpu memory pids\n")
        assert got is None and "is not delegated to us" in why


def test_where_nodes_get_no_cgroup_it_is_said_once_why():
    """This machine's own answer, whatever it is: why not, among the capability warnings once;
    or where nodes get their groups, which is no warning."""
    from train.env.sandbox import cgroup_delegation, cgroup_memory

    directory, why = cgroup_delegation()
    line = cgroup_memory()
    assert line == why if directory is None else str(directory) in line
    assert sum(line in w for w in capabilities().warnings) == (1 if directory is None else 0)


def test_a_node_in_the_fallback_cannot_read_another_nodes_workspace_or_output(limits):
    """Another node staged beside it (its workspace, its output): the fallback shows this node
    the host's files, and neither opens for it."""
    from train.env import sandbox, workspaces
    from train.env.sandbox import SandboxJob

    if not capabilities().uid_switch:
        lacking("root, for a uid of each node's own")
    import tempfile

    # a root outside /tmp, /var/tmp and /dev/shm (the fallback's are the node's own): one it
    # shows the node as the host has it
    root = tempfile.mkdtemp(prefix="rollout-test-", dir="/run")
    os.chmod(root, 0o755)
    limits = dataclasses.replace(limits, workspace_root=root)
    task = load_task("mini-tabular-accuracy")
    other = SandboxJob(code="# the other node's code\n", public_dir=str(task.public_dir), hidden_dirs=(),
                       limits=limits)
    base = workspaces.new_workspace(limits.workspace_root)
    ws, uid, _, lease = sandbox._stage(other, base)
    (base / "output.log").touch(mode=0o600)
    (base / "output.log").write_text("the other node's output\n")
    try:
        code = ("import json\nfound = {}\n"
                f"for path in ({str(ws / 'solution.py')!r}, {str(ws / 'submission')!r}, {str(base / 'output.log')!r}):\n"
                "    try:\n        found[path] = open(path).read()[:40]\n"
                "    except OSError as exc:\n        found[path] = type(exc).__name__\n"
                "print('FOUND', json.dumps(found))\n")
        record = evaluate_code(task, code, limits=dataclasses.replace(limits, allow_list=False))
    finally:
        os.close(lease)
        workspaces.remove_tree(root)
    line = next(l for l in record["term_tail"].splitlines() if l.startswith("FOUND "))
    assert set(json.loads(line[6:]).values()) == {"PermissionError"}, line


def test_the_fallback_gives_a_node_its_own_tmp_and_dev_shm(limits, tmp_path):
    """Where namespaces work, the fallback's /tmp, /var/tmp and /dev/shm are the node's own: it finds
    nothing the host keeps there, and what it writes there goes with it."""
    import uuid

    if not capabilities().namespaces:
        lacking("a mount namespace for the fallback")
    token = f"fallback-{uuid.uuid4().hex[:12]}"
    planted = Path("/tmp") / f"{token}-host"
    planted.write_text("the host's")
    code = (f"import json, os\nfound = [p for p in ('/tmp/{token}-host',) if os.path.exists(p)]\n"
            f"for d in ('/tmp', '/var/tmp', '/dev/shm'):\n    open(os.path.join(d, '{token}'), 'w').write('x')\n"
            "print('FOUND', json.dumps(found), flush=True)\n")
    try:
        record = evaluate_code(load_task("mini-tabular-accuracy"), code,
                               limits=dataclasses.replace(limits, allow_list=False))
    finally:
        planted.unlink()
        left = [d for d in ("/tmp", "/var/tmp", "/dev/shm") if (Path(d) / token).exists()]
        for d in left:
            (Path(d) / token).unlink()
    assert record["status"] == "no_submission", record["term_tail"]
    assert "FOUND []" in record["term_tail"] and left == []
