"""What typing the reward-model records costs: `warehouse ingest` of the sample's reward-model
run (data root 004's layout: 1 manifest, 12 jobs, 42 artifacts, 4 steps, 14 evaluations with
their sections and receipts, an outcome) into a fresh warehouse, and one `typed_rows` call per
record kind on a warm connection.

    PYTHONPATH=. python3 benchmarks/rm_ingest_bench.py --repeat 5

Prints the wall seconds of each ingest and the median of each kind's call in ms. Run it from
two checkouts in turn to compare them (RESULTS.md, issue 39).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

KINDS = {"rm_step": {"job": "formal", "step": 1, "loss": 0.69},
         "rm_evaluation": {"evaluation_id": "e", "phase": "formal", "evaluator": "x", "split": "full", "score": 1.0},
         "rm_section": {"score": 80.0, "n": 358}}


def ingest_seconds(root: Path) -> float:
    from ingest.pipeline import ingest_roots
    from ingest.rm_sample import write_rm_run
    from warehouse.migrate import init_db

    url = f"duckdb:///{root / 'w.duckdb'}"
    init_db(url)
    write_rm_run(root / "data")
    start = time.perf_counter()
    ingest_roots(url, [str(root / "data")], [])
    return time.perf_counter() - start


def call_ms(root: Path, repeat: int) -> dict[str, float]:
    from ingest import rm_records
    from warehouse.db import connect

    if not hasattr(rm_records, "typed_rows"):
        return {}
    with connect(f"duckdb:///{root / 'w.duckdb'}") as con:
        out = {}
        for kind, record in KINDS.items():
            times = []
            for _ in range(repeat + 1):
                start = time.perf_counter()
                rm_records.typed_rows(con, kind, [record])
                times.append(time.perf_counter() - start)
            out[kind] = 1000 * statistics.median(times[1:])
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    seconds, calls = [], {}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            seconds.append(ingest_seconds(Path(tmp)))
            calls = call_ms(Path(tmp), args.repeat)
    print("ingest s:", " ".join(f"{s:.2f}" for s in seconds), f"(median {statistics.median(seconds):.2f})")
    for kind, ms in calls.items():
        print(f"typed_rows {kind}: median {ms:.1f} ms")


if __name__ == "__main__":
    main()
