"""Test isolation shared by every area: no test sees the user's environment or home."""
from __future__ import annotations

import os

import pytest

from warehouse.config import DATA_PATH_ENV_VAR, DB_ENV_VAR


# Every tiny policy a test builds (in this process or a `train run` it starts) trains all its
# steps: with the build's 270 s limit a slow machine got a weaker policy, and the tests of what
# it learns (the valid rate, the health gate) failed for the machine's speed.
os.environ.setdefault("TRAIN_TINY_POLICY_TIME_LIMIT", "0")  # train.tiny.policy.TIME_LIMIT_ENV (test_run_policy.py checks)


def pytest_collection_modifyitems(config, items):
    """Files holding a test marked slow run first, in their order, then the rest in theirs.
    Under pytest-xdist (CI's 2 workers, one file per worker at a time) the long files start
    early while the short ones fill the other worker, rather than a long file starting last
    and running alone. Within a file nothing moves."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


def pytest_terminal_summary(terminalreporter):
    """Where the time went by test file (a file runs whole on one pytest-xdist worker, so the
    files are what the workers balance) and, under xdist, per worker: its tests' seconds and
    when its last test ended, from the run's first test start. The --durations list names tests."""
    from collections import Counter, defaultdict

    files, busy, ends = Counter(), Counter(), defaultdict(float)
    starts = []
    for reports in terminalreporter.stats.values():
        for rep in reports:
            if not isinstance(rep, pytest.TestReport):
                continue
            files[rep.nodeid.split("::")[0]] += rep.duration
            starts.append(getattr(rep, "start", 0.0))  # a report's start and stop: pytest 8.2 on
            worker = getattr(getattr(rep, "node", None), "gateway", None)
            if worker is not None:
                busy[worker.id] += rep.duration
                ends[worker.id] = max(ends[worker.id], getattr(rep, "stop", 0.0))
    if not files:
        return
    terminalreporter.section("slowest 15 test files")
    for path, seconds in files.most_common(15):
        terminalreporter.write_line(f"{seconds:8.1f}s  {path}")
    for worker in sorted(busy):
        ended = f", its last ended {ends[worker] - min(starts):.0f} s after the first began" if min(starts) else ""
        terminalreporter.write_line(f"worker {worker}: {busy[worker]:.0f} s of tests{ended}")


@pytest.fixture(scope="session", autouse=True)
def shared_tiny_policy(tmp_path_factory):
    """One tiny-policy cache for the whole run ($TRAIN_TINY_POLICY_DIR, train.tiny.policy.TINY_DIR_ENV):
    CI sets it for all its stages; otherwise the run's temp root, which pytest-xdist's workers
    share (the build takes a file lock, so the first test that needs the policy builds it and the
    others load it). Without it each module that trains built its own, about 100 s each."""
    if not os.environ.get("TRAIN_TINY_POLICY_DIR"):
        root = tmp_path_factory.getbasetemp()
        if os.environ.get("PYTEST_XDIST_WORKER"):
            root = root.parent  # pytest-N/popen-gwK: the parent is the run's, shared by its workers
        os.environ["TRAIN_TINY_POLICY_DIR"] = str(root / "tiny-policy")


@pytest.fixture(scope="session")
def fake_home(tmp_path_factory):
    return tmp_path_factory.mktemp("home")


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch, fake_home):
    """Unset our variables and point HOME, caches and data at a per-session temp dir."""
    monkeypatch.delenv(DB_ENV_VAR, raising=False)
    monkeypatch.delenv(DATA_PATH_ENV_VAR, raising=False)
    monkeypatch.setenv("HOME", str(fake_home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(fake_home / ".cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(fake_home / ".local" / "share"))  # the bundled tasks' data
    monkeypatch.setenv("HF_HOME", str(fake_home / ".cache" / "huggingface"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("WANDB_MODE", "disabled")


@pytest.fixture(scope="module")
def small_sample_root(tmp_path_factory):
    """Two runs of the bundled sample root, one per node-file style."""
    import shutil

    from ingest.sample import write_sample_root

    sample = write_sample_root(tmp_path_factory.mktemp("sample") / "root", seed=0)
    root = tmp_path_factory.mktemp("small") / "root"
    for run in ("20260702_020809", "20260719_045416_27b_mix4_hr"):
        shutil.copytree(sample / run, root / run)
    return root


@pytest.fixture(scope="session")
def template_db(tmp_path_factory):
    """One migrated warehouse per session; tests get copies (init takes about a second)."""
    from warehouse.migrate import init_db

    path = tmp_path_factory.mktemp("template") / "wh.duckdb"
    init_db(f"duckdb:///{path}")
    return path


@pytest.fixture
def db_url(template_db, tmp_path) -> str:
    """A fresh, migrated warehouse file in tmp_path (a copy of the session's template)."""
    import shutil

    target = tmp_path / "wh.duckdb"
    shutil.copyfile(template_db, target)
    return f"duckdb:///{target}"
