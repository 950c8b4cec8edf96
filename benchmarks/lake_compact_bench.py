"""Dashboard pages on a DuckLake before and after `warehouse compact` merges its data files.

    python benchmarks/lake_compact_bench.py LAKE_URL [--repeats 3]

Workload: the lake given (e.g. the 1.3 GB generated root of `scale_bench.py` ingested three
times under distinct run ids: a data file per table for each ingest commit). Each page of
`scale_bench.py` (`runs`, `run`, `nodes`, `node`, `node_tokens`, `compare`, `quality`) is
fetched once per process, after a warm-up request, `--repeats` processes in a row; then
`warehouse compact` runs (seconds, peak RSS and the file counts it reports), then the pages
again. Baseline: the same lake before the compaction, measured in the same run. Prints each
page's median seconds before and after and their ratio. The lake is compacted for good: use
a copy, or one built for it.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_bench as sb


def _compact(url: str):
    from warehouse.maintenance import compact

    t0 = time.perf_counter()
    done = compact(url)
    return time.perf_counter() - t0, sb._peak_mb(), done


def _medians(url: str, repeats: int) -> dict[str, float]:
    runs = [sb._in_own_process(sb._pages, url) for _ in range(repeats)]
    return {page: statistics.median(r[page] for r in runs) for page in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the lake: ducklake:sqlite:PATH#data_path=DIR (as warehouse --db takes it)")
    parser.add_argument("--repeats", type=int, default=3, help="processes per page set, before and after")
    args = parser.parse_args()
    from warehouse.config import resolve_db_url

    url = resolve_db_url(args.url)
    before = _medians(url, args.repeats)
    seconds, mb, done = sb._in_own_process(_compact, url)
    print(f"compact: {seconds:.1f} s, peak {mb:.0f} MB; {done.files_before:,} files -> {done.files_after:,} "
          f"({done.tables} tables merged; {', '.join(done.left)} left as written)")
    after = _medians(url, args.repeats)
    print(f"{'page':20s} {'before_s':>9s} {'after_s':>9s} {'after/before':>13s}")
    for page in before:
        print(f"{page:20s} {before[page]:9.3f} {after[page]:9.3f} {after[page] / before[page]:12.2f}x")


if __name__ == "__main__":
    main()
