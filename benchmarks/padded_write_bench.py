"""A small write into a large warehouse: padded writes against a version without them (issue 40).

    python benchmarks/padded_write_bench.py WAREHOUSE.duckdb --base BASE --work DIR \\
        --baseline CHECKOUT [--runs 3] [--tag 7100]

Workload: 2-node runs (one task-round of 2 nodes cut from the generated root `--base`, as
`scale_bench.py` cuts them, ~36 K response tokens) ingested into two copies of WAREHOUSE,
each run a `warehouse ingest` process of its own (`/usr/bin/time`: seconds and peak RSS of
the whole process, imports and the closing checkpoint included), alternating:

* baseline: the checkout `--baseline` (a version before warehouse/rowgroups.py), whose
  commits append into node_payloads' last row group, which the checkpoint rewrites;
* padded: this checkout, whose writes append whole row groups (warehouse/rowgroups.py) and
  so leave the last row group as it is.

Before each write it prints the rows in node_payloads' last row group (the one an unpadded
write joins and rewrites; 0 when it is full). Every write adds a run to the copies (run ids
`20260802_<tag>_twonode`, new each time); WAREHOUSE itself is only read.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_bench as sb

REPO = Path(__file__).resolve().parent.parent


def _ingest_process(checkout: Path, db: Path, root: Path) -> tuple[float, float]:
    """A `warehouse ingest` process of `checkout`'s code: (seconds, peak RSS MB)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        subprocess.run(["/usr/bin/time", "-o", out.name, "-f", "%e %M", sys.executable, "-m", "warehouse.cli",
                        "--db", str(db), "ingest", str(root)], cwd=tempfile.gettempdir(), env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds, kib = out.read().split()[-2:]
    return float(seconds), int(kib) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("--base", type=Path, required=True, help="the generated root (scale_bench's)")
    parser.add_argument("--work", type=Path, required=True, help="where the copies and 2-node roots go")
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the version to compare with")
    parser.add_argument("--runs", type=int, default=3, help="writes of each variant")
    parser.add_argument("--tag", type=int, default=7100, help="the first run id tag (new ones each time)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    copies = {"baseline": (args.baseline, args.work / "baseline.duckdb"), "padded": (REPO, args.work / "padded.duckdb")}
    for _, db in copies.values():
        shutil.copyfile(args.warehouse, db)
    seconds: dict[str, list[float]] = {name: [] for name in copies}
    for i in range(args.runs):
        for name, (checkout, db) in copies.items():
            two, _ = sb.cut_two_node(args.base, args.work, f"{args.tag + 2 * i + (name == 'padded'):06d}")
            last = sb._in_own_process(sb._open_row_group, f"duckdb:///{db}")
            s, mb = _ingest_process(checkout, db, two)
            shutil.rmtree(two)
            seconds[name].append(s)
            print(f"{name:9s} last row group {last:5d} rows: {s:5.2f} s, peak {mb:5.0f} MB", flush=True)
    sb.print_means(seconds, "padded", "baseline")


if __name__ == "__main__":
    main()
