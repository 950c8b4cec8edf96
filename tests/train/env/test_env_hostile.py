"""Hostile solutions against a non-editable install: none of them may score.

The package is installed the ordinary way (``pip install .``, not editable) into a fresh venv,
so its files sit in the interpreter's prefix, which the sandbox binds into every node. Each
solution in ``cases/hostile/`` hunts for the answers one way (the prefix's site-packages, the
checkout and its git history, the task generator, /proc of other processes, the host's /tmp)
and submits what it found through ``train env check``. A solution that found the real answers
would score accuracy 1.0 (the control below grades them so); each must score less. Tests
parametrized by ``sandbox`` attack the deny-list fallback too (``--unsafe-no-sandbox``, where
namespaces work): its private /tmp, /var/tmp and /dev/shm, and the host's sockets. Each test
skips, with the reason, where the sandbox it attacks is missing (fails under
ROLLOUT_REQUIRE_ISOLATION=1).

The venv reuses the running interpreter's site-packages as hard links (instant, no network),
without the editable install's finder, then installs this checkout from a copy of its tree.
.ci/stage_sandbox.sh runs this file on a clean machine.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from pathlib import Path

import pytest
from tests.isolation import lacking
from tests.train.env.listeners import KINDS, host_listener, nothing_arrived

REPO = Path(__file__).resolve().parents[3]
HOSTILE = Path(__file__).parent / "cases" / "hostile"
TASK = "mini-tabular-accuracy"
SANDBOXES = ["bwrap", "fallback"]  # the fallback: --unsafe-no-sandbox where namespaces work


def _hardlink_tree(src: Path, dest: Path) -> None:
    subprocess.run(["cp", "-al", str(src), str(dest)], check=True)


def _fresh_venv(base: Path) -> Path:
    """A venv holding this interpreter's packages (hard links) and this checkout, non-editable."""
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = Path(subprocess.run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    shutil.rmtree(purelib)
    _hardlink_tree(Path(sysconfig.get_paths()["purelib"]), purelib)
    for leftover in [*purelib.glob("__editable__*"), *purelib.glob("rollout_warehouse-*.dist-info")]:
        shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
    source = base / "source"  # a copy: pip builds in the tree it is given
    _copy_source(source)
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", str(source)], check=True)
    return venv


def _copy_source(dest: Path) -> None:
    """What `pip install .` of a clone is given: the files git tracks and those it does not
    ignore, not a working checkout's ignored demo roots (one holds a dangling link, as a lost
    run's folder does), venvs and caches."""
    if not (REPO / ".git").exists():  # an unpacked sdist: every file, links as links
        shutil.copytree(REPO, dest, symlinks=True, ignore=shutil.ignore_patterns(".venv*", "__pycache__"))
        return
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, map(os.fsdecode, listed)):
        if (REPO / name).is_file():  # not one deleted in the working tree
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    from train.env import capabilities

    if not capabilities().bwrap and not capabilities().namespaces:
        lacking(f"{capabilities().bwrap_missing}, and no namespaces for the fallback: nothing to attack here")
    base = tmp_path_factory.mktemp("hostile")
    here = Path(sysconfig.get_paths()["purelib"])
    if os.stat(base).st_dev != os.stat(here).st_dev:  # hard links need one filesystem: beside the venv
        base = Path(tempfile.mkdtemp(prefix=".hostile-", dir=Path(sys.prefix).parent))
    try:
        yield _installed(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _installed(base: Path) -> dict:
    venv = _fresh_venv(base)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of the checkout
    env.update(HOME=str(base / "home"), XDG_DATA_HOME=str(base / "data"), XDG_CACHE_HOME=str(base / "cache"))
    where = subprocess.run([venv / "bin" / "python", "-c", "import train; print(train.__file__)"],
                           capture_output=True, text=True, env=env, cwd=base, check=True).stdout.strip()
    assert where.startswith(str(venv)), where  # the installed package, not the checkout
    return {"venv": venv, "env": env, "base": base}


@pytest.fixture(autouse=True)
def _sandbox_here(request):
    """Each test needs the sandbox it attacks: bubblewrap, or namespaces for the fallback."""
    from train.env import capabilities

    sandbox = request.node.callspec.params.get("sandbox", "bwrap") if hasattr(request.node, "callspec") else "bwrap"
    if sandbox == "bwrap" and not capabilities().bwrap:
        lacking(f"{capabilities().bwrap_missing}: train env check refuses to run a solution here")
    if sandbox == "fallback" and not capabilities().namespaces:
        lacking("no mount and network namespaces (root or user namespaces): the fallback isolates nothing to attack")


def _check(installed, code: str, sandbox: str = "bwrap") -> dict:
    path = installed["base"] / f"solution-{uuid.uuid4().hex[:8]}.py"
    path.write_text(code)
    unsafe = ["--unsafe-no-sandbox"] if sandbox == "fallback" else []
    out = subprocess.run([installed["venv"] / "bin" / "train", "env", "check", TASK, "--code", str(path),
                          "--timeout", "240", "--format", "json", *unsafe],
                         capture_output=True, text=True, env=installed["env"], cwd=REPO, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def _answers(installed) -> Path:
    """The install's answers, where the grader reads them (outside every sandbox)."""
    code = f"from train.env import load_task; print(load_task({TASK!r}).answers_path)"
    out = subprocess.run([installed["venv"] / "bin" / "python", "-c", code], capture_output=True, text=True,
                         env=installed["env"], cwd=installed["base"], check=True)
    return Path(out.stdout.strip())


def _hostile(name: str, **values) -> str:
    code = (HOSTILE / "_submit.py").read_text() + "\n" + (HOSTILE / name).read_text()
    for key, value in values.items():
        code = code.replace(key, str(value))
    return code


def _report(record) -> dict:
    line = next((l for l in record["term_tail"].splitlines() if l.startswith("HOSTILE ")), None)
    assert line is not None, {k: record[k] for k in ("status", "exc_type", "term_tail")}
    return json.loads(line.split(" ", 1)[1])


def test_the_answers_exist_and_would_score_one(installed):
    """The control: the install has answers, outside its prefix, and submitting them scores 1.0."""
    answers = _answers(installed)
    assert answers.is_file() and not answers.is_relative_to(installed["venv"])
    assert oct(answers.parent.parent.parent.parent.stat().st_mode & 0o777) == "0o700"  # the data dir
    installed_tasks = installed["venv"].glob("lib/python*/site-packages/train/tasks")
    assert [p for d in installed_tasks for p in d.rglob("*.csv")] == []  # no data in the package
    record = _check(installed, f"import shutil\nshutil.copy({str(answers)!r}, 'submission/submission.csv')\n")
    # the node cannot open the path, so the control grades the file as the grader does, here
    assert record["status"] == "crashed" and record["exc_type"] in ("FileNotFoundError", "PermissionError")
    code = (f"from train.env import load_task; from train.env.grading import grade_submission; "
            f"from pathlib import Path; print(grade_submission(load_task({TASK!r}), Path({str(answers)!r})).test_metric)")
    out = subprocess.run([installed["venv"] / "bin" / "python", "-c", code], capture_output=True, text=True,
                         env=installed["env"], cwd=installed["base"], check=True)
    assert float(out.stdout.strip()) == 1.0


@pytest.mark.parametrize("name", ["glob_prefix.py", "read_checkout.py", "regenerate.py", "proc_snoop.py"])
def test_a_hostile_solution_does_not_score(installed, name):
    data_dir = installed["env"]["XDG_DATA_HOME"]
    record = _check(installed, _hostile(name, DATA_DIR=data_dir, REPO_DIR=REPO))
    report = _report(record)
    assert record["status"] == "ok", record["term_tail"]  # it ran to the end and submitted
    assert record["test_metric"] < 1.0 and record["reward"] < 1.0, report
    assert not any(Path(f).is_relative_to(data_dir) or str(REPO) in f for f in report["found"]), report


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_node_writes_nothing_into_the_hosts_tmp_and_finds_nothing_there(installed, sandbox):
    """The real answers left in the host's /tmp, /var/tmp and /dev/shm: the node finds none,
    and what it writes into each of them is gone with it (under bubblewrap they do not exist;
    the fallback gives it a private tmpfs on each)."""
    token = f"hostile-{uuid.uuid4().hex[:12]}"
    dirs = [Path(d) / f"{token}-host" for d in ("/tmp", "/var/tmp", "/dev/shm")]
    for where in dirs:
        where.mkdir(mode=0o755)
        shutil.copy(_answers(installed), where / "answers.csv")
        os.chmod(where / "answers.csv", 0o644)  # open to any uid, the node's too
    try:
        record = _check(installed, _hostile("host_tmp.py", TOKEN=token), sandbox)
        report = _report(record)
        left = [Path(d) / token for d in ("/tmp", "/var/tmp", "/dev/shm") if (Path(d) / token).exists()]
    finally:
        for where in dirs:
            shutil.rmtree(where, ignore_errors=True)
        for d in ("/tmp", "/var/tmp", "/dev/shm"):
            Path(d, token).unlink(missing_ok=True)
    assert record["status"] == "ok" and report["found"] == [], report
    assert record["test_metric"] < 1.0
    assert left == []


@pytest.mark.parametrize("sandbox", ["fallback"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_node_in_the_fallback_reaches_no_socket_of_the_host(installed, sandbox, kind):
    """A Unix socket the host listens on in /tmp, /var/tmp or /run as root (mode 777 in a directory of
    mode 755: any uid may connect), an abstract one, TCP on 127.0.0.1: the host connects to each
    (the control; test_env_fallback.py's control connects as another uid); the fallback's node
    connects to none."""
    token = f"hostile-{uuid.uuid4().hex[:12]}"
    with host_listener(kind, token) as (listener, (family, address)):
        values = {"TARGET_PATH": "-", "TARGET_ABSTRACT": "-", "TARGET_PORT": "-"}
        if family == "inet":
            values["TARGET_PORT"] = address[1]
        else:
            values["TARGET_ABSTRACT" if address.startswith("\0") else "TARGET_PATH"] = address.lstrip("\0")
        record = _check(installed, _hostile("host_socket.py", **values), sandbox)
        sockets = next(l for l in record["term_tail"].splitlines() if l.startswith("SOCKETS "))
        nothing_arrived(listener)
    assert len(_report(record)["tried"]) == 1, sockets  # it tried the one address it was given
    assert record["status"] == "ok" and "'reached': []" in sockets, sockets


# --- what a node leaves behind: the trainer follows none of it, removes all of it ----------------

@pytest.fixture
def planted(installed):
    """The real answers as a perfect submission.csv in a host directory no node can read."""
    token = f"hostile-{uuid.uuid4().hex[:12]}"
    where = Path("/tmp") / token
    where.mkdir(mode=0o700)
    shutil.copy(_answers(installed), where / "submission.csv")
    yield token
    shutil.rmtree(where, ignore_errors=True)


@pytest.mark.parametrize("variant", ["dir_link", "dir_link_chain", "file_link", "file_link_via_proc",
                                     "hard_link", "fifo"])
def test_a_node_cannot_point_the_grader_at_the_hosts_files(installed, planted, variant):
    """submission/ or its file a link to a perfect submission on the host, through any
    component, or a FIFO or a hard link: not read, not graded (the trainer runs as root)."""
    record = _check(installed, _hostile("link_submission.py", VARIANT_NAME=variant, TOKEN=planted))
    _report(record)
    assert (record["status"], record["reward"], record["test_metric"]) == ("no_submission", -0.5, None), \
        record["term_tail"][-500:]
    assert "not read, not graded" in record["term_tail"]


def test_a_tree_no_cleanup_could_remove_is_removed_and_the_next_node_runs(installed):
    """3,000 nested dirs, odd names, dirs of mode 000, a FIFO, a socket, links out: the node's
    record stands (ok), its workspace goes, and the next node in the same root runs."""
    tmp = installed["base"] / f"tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    env = {**installed["env"], "TMPDIR": str(tmp)}
    record = _check({**installed, "env": env}, _hostile("messy_tree.py"))
    assert record["status"] == "ok" and record["test_metric"] < 1.0, record["term_tail"][-500:]
    (root,) = tmp.glob("rollout-warehouse-nodes-*")
    assert list(root.glob("node-*")) == []
    again = _check({**installed, "env": env}, _hostile("glob_prefix.py", DATA_DIR=env["XDG_DATA_HOME"], REPO_DIR=REPO))
    assert again["status"] == "ok"
    assert Path("/etc/passwd").is_file()


@pytest.mark.parametrize("kind", ["identical_columns", "million_columns", "long_fields"])
def test_a_submission_built_to_stall_the_grader_is_invalid_in_a_line(installed, kind):
    record = _check(installed, _hostile("wide_header.py", WIDE_KIND=kind))
    _report(record)
    assert record["status"] == "invalid_submission" and record["reward"] == -0.5, record["grade_error"]
    assert len(record["grade_error"]) <= 500
