"""Many writers and a reader at once, as real processes: DuckLake against the plain file.

Four `train run --model tiny --no-learn` and two `warehouse ingest` processes write into one
warehouse while a reader holds a connection open and queries every view in a loop.

* DuckLake (SQLite catalog here; PostgreSQL in CI through $ROLLOUT_TEST_PG_CONNINFO, see
  .ci/stage_ducklake.sh): nobody waits on a lock. No writer spools or fails, every round and
  every file lands exactly once, the reader never fails a query, and the gate passes.
* The file: the reader's open connection shuts every writer out. The ingests wait 30 s and
  fail with "locked", the trainers wait for the lock (`--lock-wait`, 5 s here: the reader
  holds the file until every writer has ended, so any wait ends the same way, and the default
  60 s at the run row and again at the round made this the suite's longest test) and spool
  the round. After the reader closes, ingesting the spools and running the ingests again
  lands everything exactly once.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from warehouse.config import resolve_db_url

pytestmark = pytest.mark.slow

TASK = "mini-tabular-accuracy"
TRAINERS = 4
PG_ENV = "ROLLOUT_TEST_PG_CONNINFO"
BIN = Path(sys.executable).parent
# Two small roots cut from the synthetic sample: two runs each, no run in both.
ROOT_RUNS = {"root_a": ("20260701_223600", "20260701_231713"),
             "root_b": ("20260702_020809", "20260702_041208")}

READER = r"""
import json, os, sys, time
from warehouse.db import connect
from warehouse.migrate import view_files
url, ready, stop, out = sys.argv[1:5]
views = [name for name, _ in view_files()]
lat, errors, loops = [], [], 0
with connect(url, read_only=True) as con:
    open(ready, "w").close()
    while not os.path.exists(stop):
        for name in views:
            t = time.perf_counter()
            try:
                con.execute(f'SELECT count(*) FROM "{name}"').fetchall()
            except Exception as exc:
                errors.append(f"{name}: {str(exc).splitlines()[0]}")
            lat.append(time.perf_counter() - t)
        loops += 1
        time.sleep(1.0)  # the connection stays open; the pause leaves the writers the machine's cores
lat.sort()
json.dump({"loops": loops, "errors": errors, "queries": len(lat),
           "p50_s": lat[len(lat) // 2] if lat else None, "max_s": lat[-1] if lat else None}, open(out, "w"))
"""


@pytest.fixture(scope="module")
def tiny_policy_env(tmp_path_factory) -> dict:
    """The environment of every child: the tiny policy built once (CI shares its cache)."""
    from train.tiny.policy import TINY_DIR_ENV, ensure_tiny_policy

    root = os.environ.get(TINY_DIR_ENV) or str(tmp_path_factory.mktemp("tiny-policy"))
    ensure_tiny_policy(root, log=lambda *_: None)
    return {**os.environ, TINY_DIR_ENV: root}


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> dict[str, Path]:
    from ingest.sample import write_sample_root

    sample = tmp_path_factory.mktemp("sample")
    write_sample_root(sample)
    out = {}
    for name, runs in ROOT_RUNS.items():
        out[name] = tmp_path_factory.mktemp(name)
        for run in runs:
            shutil.copytree(sample / run, out[name] / run, symlinks=True)
    return out


def _lake_url(tmp_path: Path, catalog: str) -> str:
    if catalog == "sqlite":
        return resolve_db_url(f"ducklake:sqlite:{tmp_path / 'catalog.sqlite'}")
    conninfo = os.environ.get(PG_ENV)
    if not conninfo:
        pytest.skip(f"${PG_ENV} names no PostgreSQL database (CI's stage_ducklake.sh sets it)")
    _empty_postgres(conninfo)
    return resolve_db_url(f"ducklake:postgres:{conninfo}", tmp_path / "lake_files")


def _empty_postgres(conninfo: str) -> None:
    """A fresh catalog for each test: drop whatever an earlier test's DuckLake left there."""
    import duckdb

    from warehouse.db import extension_file

    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False})
    con.execute(f"LOAD '{extension_file('postgres_scanner')}'")
    con.execute(f"ATTACH '{conninfo}' AS pg (TYPE postgres)")
    con.execute("CALL postgres_execute('pg', 'DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public')")
    con.close()


def _warehouse(url: str, *args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "warehouse"), "--db", url, *args], capture_output=True, text=True,
                          env=env, timeout=900)


def _start_reader(url: str, tmp_path: Path, env: dict):
    ready, stop, out = (tmp_path / n for n in ("reader.ready", "reader.stop", "reader.json"))
    proc = subprocess.Popen([sys.executable, "-c", READER, url, str(ready), str(stop), str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while not ready.exists():
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.1)
    return proc, stop, out


def _start_writers(url: str, roots: dict, tmp_path: Path, env: dict, rounds: int, lock_wait_s: float | None = None) -> dict:
    """`lock_wait_s`: the trainers' --lock-wait (None: train run's default)."""
    wait = ["--lock-wait", str(lock_wait_s)] if lock_wait_s is not None else []
    procs = {}
    for i in range(TRAINERS):
        run_id = f"conc_{i}"  # distinct ids: runs started in one second would share one today
        procs[run_id] = subprocess.Popen(
            [str(BIN / "train"), "run", "--model", "tiny", "--rounds", str(rounds), "--tasks", TASK,
             "--no-learn", "--set", "siblings_per_expansion=2", "--exec-workers", "1", "--device", "cpu",
             "--run-id", run_id, "--db", url, "--spool-root", str(tmp_path / "spool" / run_id), *wait],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for name, root in roots.items():
        procs[name] = subprocess.Popen([str(BIN / "warehouse"), "--db", url, "ingest", str(root)], env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return procs


def _finish(procs: dict) -> dict[str, tuple[int, str]]:
    return {name: (p.wait(timeout=900), p.stdout.read()) for name, p in procs.items()}


def _nodes_said(output: str) -> int:
    """What the trainer printed it generated: `Round N: K nodes generated, ...`."""
    return sum(int(line.split(": ")[1].split()[0]) for line in output.splitlines()
               if line.startswith("Round ") and " nodes generated" in line)


@pytest.fixture(scope="module")
def reference(roots, tmp_path_factory) -> dict:
    """Per-run node counts and ingest exit codes of the same roots, ingested one at a time
    (once for the module: every test compares against the same)."""
    url = resolve_db_url(tmp_path_factory.mktemp("reference") / "reference.duckdb")
    assert _warehouse(url, "init").returncode == 0
    codes = {name: _warehouse(url, "ingest", str(root)).returncode for name, root in roots.items()}
    return {"codes": codes, "nodes": _query(url, "SELECT run_id, count(*) FROM nodes GROUP BY ALL")}


def _query(url: str, sql: str) -> dict:
    from warehouse.query import run_query

    return dict(run_query(url, sql).rows)


def _assert_exactly_once(url: str, reference: dict, nodes_said: dict) -> None:
    from warehouse.query import run_query

    dupes = run_query(url, "SELECT count(*) - count(DISTINCT path), count(*) - count(DISTINCT source_id) "
                           "FROM sources").rows[0]
    assert dupes == (0, 0)
    nodes = _query(url, "SELECT run_id, count(*) FROM nodes GROUP BY ALL")
    assert {r: nodes.get(r) for r in reference["nodes"]} == reference["nodes"]
    assert {r: nodes.get(r) for r in nodes_said} == nodes_said
    assert all(n > 0 for n in nodes_said.values())
    check = _warehouse(url, "check")
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("catalog", ["sqlite", "postgres"])
def test_ducklake_takes_four_trainers_two_ingests_and_a_reader_at_once(catalog, roots, reference, tiny_policy_env,
                                                                       tmp_path):
    url = _lake_url(tmp_path, catalog)
    assert _warehouse(url, "init", env=tiny_policy_env).returncode == 0
    reader, stop, out = _start_reader(url, tmp_path, tiny_policy_env)
    results = _finish(_start_writers(url, roots, tmp_path, tiny_policy_env, rounds=2))
    stop.touch()
    reader.wait(timeout=300)
    read = json.loads(out.read_text())

    for name, (code, output) in results.items():
        expected = reference["codes"].get(name, 0)  # an ingest exits 2 when a root has bad lines
        assert code == expected, f"{name}:\n{output}"
        assert "spooled" not in output and "locked" not in output, f"{name}:\n{output}"
    assert not (tmp_path / "spool").exists()
    assert read["errors"] == [] and read["loops"] >= 1
    trainers = {n: _nodes_said(o) for n, (_, o) in results.items() if n.startswith("conc_")}
    _assert_exactly_once(url, reference, trainers)
    assert _query(url, "SELECT run_id, count(*) FROM rounds WHERE run_id LIKE 'conc_%' GROUP BY ALL") == \
        {run: 2 for run in trainers}
    print(f"\n{catalog}: reader ran {read['queries']} view queries, p50 {read['p50_s']:.3f} s, "
          f"max {read['max_s']:.3f} s, while the writers ran")


def test_the_file_shuts_writers_out_while_a_reader_holds_it_and_loses_nothing(roots, reference, tiny_policy_env,
                                                                              tmp_path):
    url = resolve_db_url(tmp_path / "wh.duckdb")
    assert _warehouse(url, "init").returncode == 0
    reader, stop, out = _start_reader(url, tmp_path, tiny_policy_env)
    results = _finish(_start_writers(url, roots, tmp_path, tiny_policy_env, rounds=1, lock_wait_s=5))
    stop.touch()
    reader.wait(timeout=300)
    assert json.loads(out.read_text())["errors"] == []  # the reader itself is never disturbed

    for name in roots:  # each ingest waited 30 s for the lock, then gave up, writing nothing
        code, output = results[name]
        assert code == 1 and "locked" in output, output
    for run_id in (n for n in results if n.startswith("conc_")):  # each trainer waited, then spooled
        code, output = results[run_id]
        spool = tmp_path / "spool" / run_id
        last = output.strip().splitlines()[-1]  # exit 3, and the one line that says how to load the spool
        assert code == 3 and last.endswith(f"ingest {spool} --manifest {spool / 'manifest.toml'}"), output
        ingest = _warehouse(url, "ingest", str(spool), "--manifest", str(spool / "manifest.toml"))
        assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    for name, root in roots.items():  # run again once the reader is gone: now they land
        assert _warehouse(url, "ingest", str(root)).returncode == reference["codes"][name]
    trainers = {n: _nodes_said(o) for n, (_, o) in results.items() if n.startswith("conc_")}
    _assert_exactly_once(url, reference, trainers)
