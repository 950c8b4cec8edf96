"""`warehouse serve` under concurrent requests: DuckLake against the file, on the same rows.

Target (issue 28): on DuckLake 200 concurrent requests all answered, p99 within 3x the
file's. Workload: `warehouse demo`'s synthetic sample (both published roots' shapes: 15
runs, 1,124 nodes) ingested into a file, copied into DuckLake (SQLite catalog) with
`warehouse migrate-to`; each engine served by `warehouse serve` in this process (uvicorn,
Starlette's thread pool), and `--concurrency` client threads released at once, each fetching
one page: the mix cycles through the runs list, run pages, a compare page, the quality page
and the live page's version poll. Latency is the client's, from request to last byte;
p50/p99 per engine over `--rounds` waves, and the ratio DuckLake / file.

DuckLake keeps each query's answer per snapshot (`warehouse.serve.lake.Answers`), so a wave
of requests for the same pages reads the lake about once per page. `--uncached N` adds the
shared lake with every query read from it (N requests at once), and `--baseline` the
dashboard as it was (one DuckLake ATTACH per request) at `--baseline-concurrency` requests,
so each step is measured in the same run. Usage::

    python benchmarks/serve_bench.py --concurrency 200 --rounds 3 --workdir /tmp/sb
    python benchmarks/serve_bench.py --concurrency 50 --uncached 50 --baseline --baseline-concurrency 20
"""
from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import threading
import time
import urllib.request
from pathlib import Path


def build(workdir: Path) -> tuple[str, str]:
    """(file URL, DuckLake URL) holding the same rows."""
    from ingest.pipeline import build_demo
    from warehouse.config import resolve_db_url
    from warehouse.transfer import migrate_to

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    file_url = resolve_db_url(workdir / "demo.duckdb")
    build_demo(file_url, str(workdir / "sample"), seed=0)
    lake_url = resolve_db_url(f"ducklake:sqlite:{workdir / 'catalog.sqlite'}", workdir / "files")
    migrate_to(file_url, lake_url)
    return file_url, lake_url


def pages(url: str) -> list[str]:
    from warehouse.query import run_query

    runs = [r[0] for r in run_query(url, 'SELECT "run_id" FROM "run_metrics" ORDER BY 1').rows]
    return ["/", f"/runs/{runs[0]}", f"/runs/{runs[-1]}", f"/compare?run={runs[0]}&run={runs[1]}",
            "/quality", f"/api/runs/{runs[0]}/version"]


def wave(base: str, paths: list[str], concurrency: int) -> tuple[list[float], list[int]]:
    """`concurrency` requests released at once: (seconds each, status each)."""
    start = threading.Barrier(concurrency)
    seconds, statuses = [0.0] * concurrency, [0] * concurrency

    def fetch(i: int) -> None:
        start.wait()
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(base + paths[i % len(paths)], timeout=600) as answer:
                answer.read()
                statuses[i] = answer.status
        except urllib.error.HTTPError as exc:
            statuses[i] = exc.code
        seconds[i] = time.perf_counter() - t0

    threads = [threading.Thread(target=fetch, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return seconds, statuses


def measure(url: str, paths: list[str], concurrency: int, rounds: int) -> dict:
    from warehouse.serve.server import background

    seconds, statuses = [], []
    with background(url) as base:
        urllib.request.urlopen(base + "/").read()  # warm: templates, the lake's ATTACH
        for _ in range(rounds):
            s, codes = wave(base, paths, concurrency)
            seconds += s
            statuses += codes
    ok = sum(code == 200 for code in statuses)
    q = statistics.quantiles(seconds, n=100, method="inclusive")  # p99 never past the max
    return {"requests": len(seconds), "ok": ok, "p50": statistics.median(seconds), "p99": q[98],
            "max": max(seconds)}


@contextlib.contextmanager
def attach_per_request():
    """The dashboard before the shared lake: every request attached the lake anew."""
    from warehouse.serve import data

    def reading(url: str):
        from warehouse.db import connect
        from warehouse.migrate import require_head

        @contextlib.contextmanager
        def opened():
            with connect(url, read_only=True, wait_s=data.BUSY_WAIT_S) as con:
                require_head(con, url)
                yield con
        return opened()

    kept = data.reading
    data.reading = reading
    try:
        yield
    finally:
        data.reading = kept


@contextlib.contextmanager
def without_answers():
    """The shared lake, but every query read from it (no answers kept per snapshot)."""
    from warehouse.serve.lake import Answers

    kept = Answers.get
    Answers.get = lambda self, key: None
    try:
        yield
    finally:
        Answers.get = kept


def row(name: str, r: dict) -> str:
    return (f"| {name} | {r['requests']} | {r['ok']} | {r['p50']:.3f} | {r['p99']:.3f} | "
            f"{r['max']:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/serve_bench"))
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", action="store_true",
                        help="Also time one ATTACH per request (the dashboard before).")
    parser.add_argument("--baseline-concurrency", type=int, default=20)
    parser.add_argument("--uncached", type=int, default=0, metavar="N",
                        help="Also time the shared lake without its answers per snapshot, N at once.")
    args = parser.parse_args()

    t0 = time.perf_counter()
    file_url, lake_url = build(args.workdir)
    paths = pages(file_url)
    print(f"workload: warehouse demo sample, {args.concurrency} concurrent requests x {args.rounds} "
          f"waves over {len(paths)} pages (built in {time.perf_counter() - t0:.0f} s)")
    results = {"file": measure(file_url, paths, args.concurrency, args.rounds),
               "DuckLake (SQLite catalog)": measure(lake_url, paths, args.concurrency, args.rounds)}
    print("| engine | requests | answered 200 | p50 s | p99 s | max s |\n|---|---|---|---|---|---|")
    for name, r in results.items():
        print(row(name, r))
    if args.uncached:
        with without_answers():
            uncached = measure(lake_url, paths, args.uncached, 1)
        print(row(f"DuckLake, no answers kept ({args.uncached} at once)", uncached))
    if args.baseline:
        with attach_per_request():
            before = measure(lake_url, paths, args.baseline_concurrency, 1)
        print(row(f"DuckLake, ATTACH per request ({args.baseline_concurrency} at once)", before))
    lake, file = results["DuckLake (SQLite catalog)"], results["file"]
    print(f"DuckLake / file: p50 {lake['p50'] / file['p50']:.2f}x, p99 {lake['p99'] / file['p99']:.2f}x "
          f"(target p99 <= 3x; every request answered 200: {lake['ok'] == lake['requests']})")
    shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
