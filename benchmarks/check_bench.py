"""Time the data-quality gate (`warehouse check`) against one scan of the nodes table.

Target (issue 5): the gate over a warehouse built from a 500 MB root runs in under 30 s on
2 cores. Two ways to get the warehouse:

* default: write a root of realistic 2-12 MB node files (`ingest.sample.write_bench_root`)
  and ingest it, exactly as a user would;
* `--synthetic-nodes N`: insert N clean node rows straight into a fresh warehouse, to see
  how the gate scales with the row count (its cost follows rows, not payload bytes).

Figures printed: the baseline (best time to scan every column of `nodes` once into Arrow),
the gate as CI runs it (`warehouse --db DB check` in a fresh process: Python start, the
Great Expectations import, frames, validation), and the gate in-process, split into
DuckDB's part (the lean frames, including the `invariant_violations` view) and GE's part.
Usage::

    python benchmarks/check_bench.py --root-mb 500 --workdir /tmp/cb
    python benchmarks/check_bench.py --synthetic-nodes 1000000 --workdir /tmp/cb
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from _warehouse import fresh_warehouse, warehouse_from_cli  # benchmarks/_warehouse.py



# Clean rows: 16-sibling groups per task-round; drafts in round 0, later rounds improve a
# node of the round before; ok nodes graded with a reward in [0, 1], the rest crashed at -0.5.
_SYNTHETIC_NODES = """
INSERT INTO nodes ("source_id", "line_no", "run_id", "round", "task", "node_id", "parent_id",
                   "sibling_group", "mode", "status", "reward", "source", "test_metric",
                   "oriented", "exc_type", "n_response_tokens", "n_response_logprobs",
                   "code_chars")
SELECT i // 16, i % 16 + 1, 'run_' || (i // $per_run), (i % $per_run) // 64,
       'task_' || ((i // 16) % 4), printf('%012x', i),
       CASE WHEN (i % $per_run) < 64 THEN NULL ELSE printf('%012x', i - 64) END,
       'g' || (i // 16),
       CASE WHEN (i % $per_run) < 64 THEN 'draft' ELSE 'improve' END,
       CASE WHEN hash(i) % 3 = 0 THEN 'ok' ELSE 'crashed' END,
       CASE WHEN hash(i) % 3 = 0 THEN (hash(i) % 1000) / 1000.0 ELSE -0.5 END,
       CASE WHEN hash(i) % 3 = 0 THEN 'grade' END,
       CASE WHEN hash(i) % 3 = 0 THEN (hash(i) % 997) / 997.0 END,
       CASE WHEN hash(i) % 3 = 0 THEN -((hash(i) % 997) / 997.0) END,
       CASE WHEN hash(i) % 3 = 0 THEN NULL ELSE 'ValueError' END,
       hash(i) % 24576, hash(i) % 24576, 100 + hash(i) % 5000
FROM range($n) AS t(i)
"""


def build_synthetic(workdir: Path, n_nodes: int) -> str:
    import duckdb

    from warehouse.config import db_path_from_url

    url = fresh_warehouse(workdir)
    con = duckdb.connect(db_path_from_url(url))
    per_run = max(64, n_nodes // 10)
    con.execute("""INSERT INTO runs ("run_id", "arm", "kind", "lost")
                   SELECT 'run_' || i, 'hr24k_u6', 'training', FALSE FROM range(11) AS t(i)""")
    con.execute(_SYNTHETIC_NODES.replace("$per_run", str(per_run)).replace("$n", str(n_nodes)))
    con.close()
    print(f"synthetic warehouse: {n_nodes} clean node rows")
    return url




def scan_seconds(url: str, repeat: int) -> tuple[int, float]:
    """(node rows, best time to read every column of nodes once into Arrow)."""
    from warehouse.db import connect

    with connect(url, read_only=True) as con:
        n = con.execute("SELECT count(*) FROM nodes").fetchall()[0][0]
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            con.sql("SELECT * FROM nodes").to_arrow_table()
            times.append(time.perf_counter() - t0)
    return n, min(times)


def cli_seconds(url: str) -> tuple[float, int]:
    """Wall time and exit code of `warehouse --db URL check` in a fresh process."""
    exe = Path(sys.executable).with_name("warehouse")
    t0 = time.perf_counter()
    done = subprocess.run([str(exe), "--db", url, "check"], capture_output=True, text=True)
    return time.perf_counter() - t0, done.returncode


def in_process_seconds(url: str) -> tuple[float, float]:
    """(DuckDB frames, GE validation) seconds of one warm in-process gate run."""
    from warehouse.quality.runner import load_frames, validate_frames
    from warehouse.quality.suites import get_suites

    suites = get_suites()
    validate_frames(load_frames(url, None, {"nodes"}), suites[:1])  # warm GE's imports
    t0 = time.perf_counter()
    frames = load_frames(url, None, {s.frame for s in suites})
    t1 = time.perf_counter()
    validate_frames(frames, suites)
    return t1 - t0, time.perf_counter() - t1


def report(url: str, repeat: int) -> None:
    n, scan = scan_seconds(url, repeat)
    cli, code = cli_seconds(url)
    frames, validate = in_process_seconds(url)
    print(f"nodes: {n}; one scan of nodes (all columns): {scan * 1e3:.1f} ms")
    print(f"warehouse check (fresh process, exit {code}): {cli:.1f} s = {cli / scan:.0f}x the scan")
    print(f"  in process, warm: frames (DuckDB) {frames:.2f} s, validation (GE) {validate:.2f} s")
    print(f"target < 30 s: {'met' if cli < 30 else 'MISSED'}")


def main() -> None:
    with warehouse_from_cli(__doc__, "bench_check", 3, build_synthetic) as (url, args):
        report(url, args.repeat)


if __name__ == "__main__":
    main()
