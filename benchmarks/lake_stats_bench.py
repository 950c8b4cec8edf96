"""Dashboard pages on a DuckLake whose empty tables have statistics, against the same lake without.

    python benchmarks/lake_stats_bench.py LAKE_URL [--rounds 3]

Workload: the lake given, with a SQLite catalog (e.g. the 505 MB generated root of
`scale_bench.py`, `write_bench_root(target_mb=505, file_mb=4.5)`, ingested three times under
distinct run ids: steps, step_metrics, run_lifecycle and the reward-model tables empty, as in
a warehouse of data roots without timing rows or reward-model runs). Baseline: the lake as it
is. The other arm: a copy of its catalog (the Parquet files shared, nothing written to them)
on which `warehouse.migrate.prime_lake_stats` ran, as `warehouse upgrade` runs it. Each page
of `scale_bench.py` (`runs`, `run`, `nodes`, `node`, `node_tokens`, `compare`, `quality`) is
fetched once per process after a warm-up request, the two arms alternated `--rounds` times.
Prints each page's median seconds on each arm and their ratio. The lake given is only read.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_bench as sb


def _prime(url: str) -> list[str]:
    from warehouse.db import engine
    from warehouse.migrate import prime_lake_stats

    eng = engine(url)
    try:
        with eng.connect() as conn:
            primed = prime_lake_stats(conn)
            conn.commit()
    finally:
        eng.dispose()
    return primed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the lake: ducklake:sqlite:PATH (as warehouse --db takes it)")
    parser.add_argument("--rounds", type=int, default=3, help="processes per arm, alternated")
    args = parser.parse_args()
    from warehouse.config import parse_ducklake, resolve_db_url

    url = resolve_db_url(args.url)
    target = parse_ducklake(url)
    if target.catalog != "sqlite":
        raise SystemExit("lake_stats_bench copies the catalog: a ducklake:sqlite: lake only")
    with tempfile.TemporaryDirectory(dir=Path(target.location).parent) as tmp:
        copy = Path(tmp) / "primed.sqlite"
        shutil.copyfile(target.location, copy)
        primed_url = url.replace(target.location, str(copy), 1)
        tables = sb._in_own_process(_prime, primed_url)
        print(f"primed {len(tables)} empty tables on the copy: {', '.join(tables) or 'none'}")
        runs: dict[str, list[dict]] = {"as is": [], "primed": []}
        for _ in range(args.rounds):
            runs["as is"].append(sb._in_own_process(sb._pages, url))
            runs["primed"].append(sb._in_own_process(sb._pages, primed_url))
    median = {arm: {page: statistics.median(r[page] for r in each) for page in each[0]} for arm, each in runs.items()}
    print(f"{'page':20s} {'as_is_s':>9s} {'primed_s':>9s} {'primed/as_is':>13s}")
    for page, base in median["as is"].items():
        print(f"{page:20s} {base:9.3f} {median['primed'][page]:9.3f} {median['primed'][page] / base:12.2f}x")


if __name__ == "__main__":
    main()
