"""The fallback sandbox without root: the launcher in a user namespace of its own.

Where bubblewrap is missing and we are not root, ``--unsafe-no-sandbox`` still gives a node
network, mount, pid and IPC namespaces, made inside an unprivileged user namespace
(``train/env/_launch.py``). These tests run the launcher itself as a uid that is not root
(nobody, when the test runs as root; else ours) with a hand-written config, the way
``train.env.sandbox`` starts it, and attack what it isolates: the host's /tmp, /var/tmp and
/dev/shm, the host's Unix sockets in those and in a third directory, an abstract socket, TCP on
127.0.0.1, and the mounts themselves. The root fallback is attacked from a non-editable
install in test_env_hostile.py.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.isolation import lacking
from tests.train.env.listeners import KINDS, elsewhere, host_listener, nothing_arrived
from train.env import sandbox

LAUNCHER = Path(sandbox.__file__).with_name("_launch.py")
NOBODY = 65534


def _as_user() -> dict:
    """subprocess arguments that run a command as a uid that is not root."""
    return {"user": NOBODY, "group": NOBODY, "extra_groups": []} if os.geteuid() == 0 else {}


@pytest.fixture(scope="module")
def bench():
    """(a python the unprivileged uid may run, a directory it owns holding the launcher)."""
    where = Path(tempfile.mkdtemp(prefix="fallback-", dir="/var/tmp"))  # /var/tmp: bound back, as a workspace is
    try:
        os.chmod(where, 0o755)
        shutil.copy(LAUNCHER, where / "_launch.py")
        python = next((p for p in (sys.executable, "/usr/bin/python3") if _runs(p)), None)
        if python is None:
            lacking(f"no Python that uid {NOBODY} may run ({sys.executable} lies under a closed directory)")
        probe_dir = where / "probe"
        probe_dir.mkdir(mode=0o777)
        probe = subprocess.run([python, str(where / "_launch.py"), "--probe", str(probe_dir)],
                               capture_output=True, text=True, **_as_user())
        if probe.returncode != 0:
            lacking(f"the kernel forbids unprivileged user namespaces here: {probe.stderr.strip()[-200:]}")
        yield python, where
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _runs(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", "pass"], capture_output=True, **_as_user()).returncode == 0
    except OSError:  # under a directory the uid may not enter
        return False


def _run(bench, code: str, hidden=()) -> dict:
    """Run ``code`` as the unprivileged uid through the launcher in the fallback's namespaces;
    its last line of output is JSON: returned."""
    python, where = bench
    workspace = where / f"ws-{uuid.uuid4().hex[:8]}"
    workspace.mkdir()
    (workspace / "solution.py").write_text(code)
    if os.geteuid() == 0:
        os.chown(workspace, NOBODY, NOBODY)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workspace), "TMPDIR": str(workspace), "LANG": "C.UTF-8"}
    config = {
        "network": True, "hidden": list(hidden), "reveal": [], "uid": None, "status_fd": None,
        "userns": [NOBODY, NOBODY] if os.geteuid() == 0 else [os.getuid(), os.getgid()],  # the launcher's own ids
        "private": {"dirs": list(sandbox.PRIVATE_DIRS), "size": 64 * 2**20, "own": [str(workspace)],
                    "keep": sandbox._kept_under(sandbox.PRIVATE_DIRS, [str(workspace)])},
        "argv": [python, "-u", "solution.py"], "env": env, "rlimits": {},
    }
    (where / "config.json").write_text(json.dumps(config))
    out = subprocess.run([python, str(where / "_launch.py"), str(where / "config.json")], cwd=workspace,
                         capture_output=True, text=True, timeout=120, env=env, **_as_user())
    shutil.rmtree(workspace, ignore_errors=True)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_node_runs_as_its_uid_and_cannot_undo_the_mounts(bench):
    """The solution is the unprivileged uid, not root of its namespace: it cannot unmount its
    /tmp (to find the host's) nor the cover over a hidden directory, and finds what was hidden empty."""
    where = Path(tempfile.mkdtemp(prefix="fallback-", dir=elsewhere()))
    try:
        _undo_the_mounts(bench, where)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _undo_the_mounts(bench, where: Path) -> None:
    os.chmod(where, 0o755)
    hidden = where / "private"
    hidden.mkdir(mode=0o755)
    (hidden / "answers.csv").write_text("id,y\n1,1\n")
    os.chmod(hidden / "answers.csv", 0o644)
    code = ("import ctypes, json, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            f"undone = [p for p in ('/tmp', '/var/tmp', '/dev/shm', {str(hidden)!r}) if libc.umount2(p.encode(), 2) == 0]\n"
            f"try:\n    hidden = open({str(hidden / 'answers.csv')!r}).read()\n"
            "except OSError as exc:\n    hidden = type(exc).__name__\n"
            "print(json.dumps({'uid': os.getuid(), 'undone': undone, 'hidden': hidden}))\n")
    uid = NOBODY if os.geteuid() == 0 else os.getuid()
    assert _run(bench, code)["hidden"] == "id,y\n1,1\n"  # the control: not hidden, the uid reads it
    got = _run(bench, code, hidden=[str(hidden)])
    assert got == {"uid": uid, "undone": [], "hidden": "PermissionError"}  # a tmpfs of mode 000 over it
    assert (hidden / "answers.csv").is_file()  # the host's stays


def test_the_hosts_tmp_var_tmp_and_dev_shm_are_not_the_nodes(bench):
    """Files the host keeps in /tmp, /var/tmp and /dev/shm are not there for the node, and
    what it writes into each goes with it."""
    token = f"fallback-{uuid.uuid4().hex[:12]}"
    dirs = ("/tmp", "/var/tmp", "/dev/shm")
    for d in dirs:
        Path(d, f"{token}-host").write_text("the host's")
        os.chmod(Path(d, f"{token}-host"), 0o644)
    code = (f"import json, os\nseen = [d for d in {dirs!r} if os.path.exists(os.path.join(d, '{token}-host'))]\n"
            f"wrote = []\nfor d in {dirs!r}:\n    open(os.path.join(d, '{token}'), 'w').write('x')\n    wrote.append(d)\n"
            "print(json.dumps({'seen': seen, 'wrote': wrote}))\n")
    try:
        got = _run(bench, code)
        left = [d for d in dirs if Path(d, token).exists()]
    finally:
        for d in dirs:
            Path(d, f"{token}-host").unlink(missing_ok=True)
            Path(d, token).unlink(missing_ok=True)
    assert got == {"seen": [], "wrote": list(dirs)}  # it wrote, into its own
    assert left == []


CONNECT = """import json, socket
family, address = ADDRESS
s = socket.socket(socket.AF_UNIX if family == "unix" else socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect(tuple(address) if family == "inet" else address)
    s.sendall(b"a node was here")
    print(json.dumps({"reached": True, "error": None}))
except OSError as exc:
    print(json.dumps({"reached": False, "error": type(exc).__name__}))
"""


@pytest.mark.parametrize("kind", KINDS)
def test_the_node_reaches_no_socket_of_the_host(bench, kind):
    """A Unix socket the host listens on in /tmp, /var/tmp or another directory (/run as
    root, mode 777), an abstract one, TCP on 127.0.0.1: the same uid outside the sandbox
    connects (the control); the node does not."""
    python, _ = bench
    with host_listener(kind, f"fallback-{uuid.uuid4().hex[:12]}") as (listener, address):
        code = CONNECT.replace("ADDRESS", repr(address))
        control = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd="/", timeout=60,
                                 **_as_user())
        assert json.loads(control.stdout)["reached"] is True, control.stdout + control.stderr
        listener.accept()[0].close()
        got = _run(bench, code)
        nothing_arrived(listener)
    assert got["reached"] is False, got


SHMGET = """import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
shmid = libc.shmget(KEY, 1 << 20, 0o1600)  # IPC_CREAT | 0600, left behind on purpose
print(json.dumps({"shmid": shmid}))
"""


def _segment(key: int) -> list[str]:
    """Lines of the host's /proc/sysvipc/shm for ``key`` (the host's IPC namespace)."""
    return [line for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:] if int(line.split()[0]) == key]


def test_the_nodes_sysv_segments_are_not_the_hosts(bench):
    """A segment the node creates and leaves lives in its own IPC namespace: the host never
    sees it, and it goes with the node. The control: the same code outside the sandbox leaves
    one in the host's."""
    import ctypes
    import random

    key = random.SystemRandom().randrange(1 << 24, 1 << 30)
    code = SHMGET.replace("KEY", str(key))
    control = subprocess.run([bench[0], "-c", code], capture_output=True, text=True, cwd="/", timeout=60,
                             **_as_user())
    shmid = json.loads(control.stdout)["shmid"]
    try:
        assert shmid >= 0, control.stderr
        assert len(_segment(key)) == 1
    finally:
        ctypes.CDLL(None).shmctl(shmid, 0, None)  # IPC_RMID
    assert _segment(key) == []
    try:
        got = _run(bench, code)
        left = _segment(key)
    finally:
        for line in _segment(key):  # one that reached the host's namespace: not left there
            ctypes.CDLL(None).shmctl(int(line.split()[1]), 0, None)
    assert got["shmid"] >= 0  # made, in the node's namespace
    assert left == []
