"""The runs page's read of run_metrics, against an earlier definition of the view, interleaved.

The runs table reads run_metrics once (its grouping is window columns of the same query), so
its cost is the view's. Workload: `warehouse demo`'s synthetic sample (15 runs, 1,124 nodes)
built into a temporary file; each repetition runs the earlier view's body, this one's, and
this one's grouped by arm with each group's runs, mean and best, one after the other, and the
medians are compared (a ratio measured in the same run, so the machine's load cancels out).
Usage::

    git show 18af8bb:sql/run_metrics.sql > /tmp/run_metrics_before.sql
    python benchmarks/runs_table_bench.py --before /tmp/run_metrics_before.sql --repeat 15
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def body(text: str) -> str:
    """A view file's SELECT (what follows `CREATE OR REPLACE VIEW ... AS`)."""
    return "WITH" + text.split("AS\nWITH", 1)[1].rstrip().rstrip(";")


def main() -> None:
    import duckdb
    from ingest.pipeline import build_demo
    from warehouse.migrate import view_files

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="an earlier sql/run_metrics.sql")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    folder = tempfile.mkdtemp()
    build_demo(f"duckdb:///{folder}/demo.duckdb", f"{folder}/sample", seed=0)
    con = duckdb.connect(f"{folder}/demo.duckdb", read_only=True)
    now = body(dict(view_files())["run_metrics"])
    queries = {"before": body(args.before.read_text()), "now": now,
               "now, grouped by arm": f"SELECT *, count(*) OVER w, avg(valid_reward_mean_best) OVER w, "
                                      f"max(valid_reward_mean_best) OVER w FROM ({now}) WINDOW w AS (PARTITION BY arm)"}
    times: dict[str, list[float]] = {name: [] for name in queries}
    for _ in range(args.repeat):
        for name, sql in queries.items():
            start = time.perf_counter()
            con.execute(sql).fetchall()
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["before"])
    for name, spent in times.items():
        print(f"{name:22s} {statistics.median(spent) * 1000:7.1f} ms  {statistics.median(spent) / base:.2f}x before")


if __name__ == "__main__":
    main()
