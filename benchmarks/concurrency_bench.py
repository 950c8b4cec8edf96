"""Many tiny-policy trainers writing at once: DuckLake (SQLite / PostgreSQL catalog) vs the file.

Targets (issue 15):

* rounds committed per minute with 1, 4 and 8 concurrent `train run --model tiny --no-learn`
  writers, per engine;
* the p50 and p99 latency of a view query (`SELECT count(*) FROM round_metrics`) while they
  write. On DuckLake the reader keeps one connection open; on the file it cannot (an open
  connection shuts every writer out), so it opens, queries and closes each time, as a shared
  notebook must, and its latency includes waiting for the writers' lock;
* every view on DuckLake against the same view on the file, on the same rows (the synthetic
  sample, copied with `warehouse migrate-to`): target within 2x.

Each writer runs `--rounds R` rounds of one task with 2 siblings (`--exec-workers 1`). A
round spooled instead of committed is counted apart. Usage::

    python benchmarks/concurrency_bench.py --writers 1,4,8 --rounds 2 --workdir /tmp/cb
    python benchmarks/concurrency_bench.py --engines file,sqlite,postgres \\
        --pg "dbname=ducklake host=/tmp/sock port=54329 user=postgres" --workdir /tmp/cb
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

BIN = Path(sys.executable).parent
TASK = "mini-tabular-accuracy"
VIEW_QUERY = 'SELECT count(*) FROM "round_metrics"'


def engine_url(engine: str, workdir: Path, pg: str | None) -> str:
    from warehouse.config import resolve_db_url

    if engine == "file":
        return resolve_db_url(workdir / "file.duckdb")
    if engine == "sqlite":
        return resolve_db_url(f"ducklake:sqlite:{workdir / 'catalog.sqlite'}")
    if not pg:
        raise SystemExit("--engines postgres needs --pg CONNINFO")
    _reset_postgres(pg)
    return resolve_db_url(f"ducklake:postgres:{pg}", workdir / "pg_files")


def _reset_postgres(conninfo: str) -> None:
    import duckdb

    from warehouse.db import extension_file

    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False})
    con.execute(f"LOAD '{extension_file('postgres_scanner')}'")
    con.execute(f"ATTACH '{conninfo}' AS pg (TYPE postgres)")
    con.execute("CALL postgres_execute('pg', 'DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public')")
    con.close()


def fresh(engine: str, workdir: Path, pg: str | None) -> str:
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    url = engine_url(engine, workdir, pg)
    subprocess.run([str(BIN / "warehouse"), "--db", url, "init"], check=True, capture_output=True)
    return url


class Reader(threading.Thread):
    """Queries a view in a loop until stopped; records each query's latency."""

    def __init__(self, url: str, hold: bool):
        super().__init__(daemon=True)
        self.url, self.hold = url, hold
        self.latencies: list[float] = []
        self.errors = 0
        self.stop = threading.Event()

    def run(self) -> None:
        from warehouse.db import connect

        if self.hold:
            with connect(self.url, read_only=True) as con:
                while not self.stop.is_set():
                    self._timed(lambda: con.execute(VIEW_QUERY).fetchall())
            return
        while not self.stop.is_set():
            def once():
                with connect(self.url, read_only=True, wait_s=600) as con:
                    con.execute(VIEW_QUERY).fetchall()
            self._timed(once)

    def _timed(self, query) -> None:
        t0 = time.perf_counter()
        try:
            query()
        except Exception:  # noqa: BLE001 - counted, the loop goes on
            self.errors += 1
        self.latencies.append(time.perf_counter() - t0)
        time.sleep(0.05)


def run_writers(url: str, n: int, rounds: int, workdir: Path, env: dict) -> dict:
    reader = Reader(url, hold=not url.startswith("duckdb:"))
    reader.start()
    t0 = time.perf_counter()
    procs = [subprocess.Popen(
        [str(BIN / "train"), "run", "--model", "tiny", "--rounds", str(rounds), "--tasks", TASK, "--no-learn",
         "--set", "siblings_per_expansion=2", "--exec-workers", "1", "--device", "cpu", "--run-id", f"bench_{i}",
         "--db", url, "--spool-root", str(workdir / "spool" / f"bench_{i}")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(n)]
    outputs = [p.communicate()[0] for p in procs]
    wall = time.perf_counter() - t0
    reader.stop.set()
    reader.join()
    committed = sum(o.count("-> db") for o in outputs)
    spooled = sum(o.count("spooled to") for o in outputs)
    failed = sum(p.returncode != 0 for p in procs)
    lat = sorted(reader.latencies) or [float("nan")]
    return {"writers": n, "wall_s": wall, "committed": committed, "spooled": spooled, "failed": failed,
            "rounds_per_min": committed / wall * 60, "p50_s": lat[len(lat) // 2],
            "p99_s": lat[min(len(lat) - 1, int(len(lat) * 0.99))], "queries": len(reader.latencies),
            "reader_errors": reader.errors}


def compare_views(workdir: Path, pg: str | None, engines: list[str], repeat: int) -> list[tuple]:
    """Every view, best of `repeat`, on the file and on each DuckLake engine (same rows)."""
    from warehouse.db import connect
    from warehouse.migrate import view_files

    file_url = fresh("file", workdir / "views_file", None)
    subprocess.run([str(BIN / "warehouse"), "--db", file_url, "demo", "--quiet", "--out",
                    str(workdir / "views_root")], check=True, capture_output=True)
    urls = {"file": file_url}
    for engine in (e for e in engines if e != "file"):
        urls[engine] = engine_url(engine, workdir / f"views_{engine}", pg)
        (workdir / f"views_{engine}").mkdir(parents=True, exist_ok=True)
        subprocess.run([str(BIN / "warehouse"), "--db", file_url, "migrate-to", urls[engine]], check=True,
                       capture_output=True)
    rows = []
    for name, _ in view_files():
        best = {}
        for engine, url in urls.items():
            with connect(url, read_only=True) as con:
                times = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    con.execute(f'SELECT * FROM "{name}"').fetchall()
                    times.append(time.perf_counter() - t0)
            best[engine] = min(times)
        rows.append((name, best))
    return rows


def compare_ingest(workdir: Path, pg: str | None, engines: list[str], size_mb: float) -> list[tuple]:
    """`warehouse ingest` of one generated root (2-12 MB node files) into each engine:
    (engine, MB/s of wall time, CPU seconds of the ingest process)."""
    import resource

    from ingest.sample import write_bench_root

    root = workdir / "ingest_root"
    if not root.exists():
        write_bench_root(root, target_mb=size_mb)
    mb = sum(p.stat().st_size for p in root.rglob("*.jsonl")) / 1e6
    rows = []
    for engine in engines:
        url = fresh(engine, workdir / f"ingest_{engine}", pg)
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([str(BIN / "warehouse"), "--db", url, "ingest", str(root)], check=True, capture_output=True)
        wall = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        rows.append((engine, mb / wall, (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="file,sqlite", help="Comma-separated: file, sqlite, postgres.")
    ap.add_argument("--writers", default="1,4,8", help="Concurrent trainer counts to measure.")
    ap.add_argument("--rounds", type=int, default=2, help="Rounds per trainer.")
    ap.add_argument("--pg", help="PostgreSQL conninfo for the postgres engine (its public schema is reset).")
    ap.add_argument("--repeat", type=int, default=3, help="Runs per view in the view comparison.")
    ap.add_argument("--skip-views", action="store_true", help="Leave out the view comparison.")
    ap.add_argument("--ingest-mb", type=float, default=0,
                    help="Also time `warehouse ingest` of a root this large into each engine.")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/concurrency_bench"))
    args = ap.parse_args()
    from train.tiny.policy import TINY_DIR_ENV, ensure_tiny_policy

    env = dict(os.environ)
    env[TINY_DIR_ENV] = str(ensure_tiny_policy().parent)  # built once, before the writers race
    engines = args.engines.split(",")
    print(f"workload: N x `train run --model tiny --no-learn --rounds {args.rounds}` (1 task, 2 siblings), "
          f"reader: {VIEW_QUERY}; {os.cpu_count()} CPUs")
    print(f"{'engine':8} {'writers':>7} {'wall s':>7} {'rounds':>6} {'spooled':>7} {'failed':>6} "
          f"{'rounds/min':>10} {'view p50 s':>10} {'view p99 s':>10} {'queries':>7}")
    for engine in engines:
        for n in (int(x) for x in args.writers.split(",") if x):
            workdir = args.workdir / f"{engine}_{n}"
            url = fresh(engine, workdir, args.pg)
            r = run_writers(url, n, args.rounds, workdir, env)
            print(f"{engine:8} {n:7d} {r['wall_s']:7.1f} {r['committed']:6d} {r['spooled']:7d} {r['failed']:6d} "
                  f"{r['rounds_per_min']:10.2f} {r['p50_s']:10.3f} {r['p99_s']:10.3f} {r['queries']:7d}", flush=True)
    if args.ingest_mb:
        print(f"\nwarehouse ingest of a {args.ingest_mb:g} MB root (2-12 MB node files):")
        for engine, mbps, cpu in compare_ingest(args.workdir, args.pg, engines, args.ingest_mb):
            print(f"  {engine:8} {mbps:6.2f} MB/s wall, {cpu:6.1f} CPU s")
    if args.skip_views:
        return
    print("\nviews on the synthetic sample (warehouse demo), best of", args.repeat, "(s):")
    for name, best in compare_views(args.workdir, args.pg, engines, args.repeat):
        ratios = "  ".join(f"{e} {t:.3f} ({t / best['file']:.2f}x)" for e, t in best.items() if e != "file")
        print(f"  {name:22} file {best['file']:.3f}  {ratios}")


if __name__ == "__main__":
    main()
