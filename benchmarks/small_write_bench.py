"""A small write into a large warehouse, by checkpoint policy (issue 40).

    python benchmarks/small_write_bench.py WAREHOUSE.duckdb --base BASE --work DIR [--pairs 3] [--tag 7000]

Workload: 2-node runs (one task-round of 2 nodes cut from the generated root `--base`, as
`scale_bench.py` makes them) ingested into an existing warehouse, each under a new run id and
in a process of its own, alternating two checkpoint policies `--pairs` times:

* baseline, `log-then-checkpoint`: the WAL takes each commit and a checkpoint follows at 96 MB
  of WAL or at the ingest's end (the policy before `warehouse.db.checkpoint_each_commit`);
* `checkpoint-at-commit`: each commit of the ingest checkpoints instead of logging
  (`WRITE_CHECKPOINT_THRESHOLD`, this version's).

Before each run it prints the payloads in node_payloads' last row group, which an append joins
and a checkpoint rewrites: what a small write costs follows it, not the warehouse's size.
Prints each run's seconds and peak RSS, then the mean of each policy and their ratio.
Every run adds a run to the warehouse: use a copy, or tags no other run has.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_bench as sb

POLICIES = {"log-then-checkpoint": "96MB", "checkpoint-at-commit": None}


def _ingest(url: str, root: str, threshold: str | None) -> tuple[float, float]:
    import warehouse.db as db
    from ingest.pipeline import ingest_roots

    if threshold is not None:
        db.WRITE_CHECKPOINT_THRESHOLD = threshold
    t0 = time.perf_counter()
    report = ingest_roots(url, [root])
    assert report.files_failed == 0 and report.files_loaded > 0, report
    return time.perf_counter() - t0, sb._peak_mb()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("--base", type=Path, required=True, help="the generated root (scale_bench's)")
    parser.add_argument("--work", type=Path, required=True, help="where the 2-node roots are cut")
    parser.add_argument("--pairs", type=int, default=3, help="runs of each policy, alternated")
    parser.add_argument("--tag", type=int, default=7000, help="the first run id tag (new ones each time)")
    args = parser.parse_args()
    url = f"duckdb:///{args.warehouse}"
    args.work.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, list[float]] = {name: [] for name in POLICIES}
    for i in range(args.pairs):
        for k, (name, threshold) in enumerate(POLICIES.items()):
            two, _ = sb.cut_two_node(args.base, args.work, f"{args.tag + 2 * i + k:06d}")
            held = sb._in_own_process(sb._open_row_group, url)
            s, mb = sb._in_own_process(_ingest, url, str(two), threshold)
            shutil.rmtree(two)
            seconds[name].append(s)
            print(f"{name:22s} open row group {held:5d} payloads: {s:6.2f} s, peak {mb:6.0f} MB", flush=True)
    sb.print_means(seconds, "checkpoint-at-commit", "log-then-checkpoint", "runs")


if __name__ == "__main__":
    main()
