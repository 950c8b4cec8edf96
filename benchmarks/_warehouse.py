"""Warehouses the benchmarks measure: built from a generated data root, or empty."""
from __future__ import annotations

import argparse
import contextlib
import shutil
import time
from pathlib import Path


def fresh_warehouse(workdir: Path) -> str:
    """A new, migrated warehouse file `workdir/bench.duckdb` (any old one is removed)."""
    from warehouse.migrate import init_db

    db = workdir / "bench.duckdb"
    db.unlink(missing_ok=True)
    url = f"duckdb:///{db}"
    init_db(url)
    return url


def build_from_root(workdir: Path, root_mb: float) -> str:
    """Write a `root_mb` data root (2-12 MB node files, like the published data roots') and ingest it."""
    from ingest.pipeline import ingest_roots
    from ingest.sample import write_bench_root

    root = workdir / "root"
    t0 = time.perf_counter()
    write_bench_root(root, target_mb=root_mb)
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 1e6
    url = fresh_warehouse(workdir)
    t1 = time.perf_counter()
    report = ingest_roots(url, [str(root)])
    print(f"root: {size:.0f} MB written in {t1 - t0:.1f} s; ingested {report.rows} rows "
          f"in {time.perf_counter() - t1:.1f} s")
    return url


@contextlib.contextmanager
def warehouse_from_cli(doc: str, workdir: str, repeat: int, build_synthetic):
    """Parse the benchmarks' shared options, build the warehouse, yield (url, args); the
    workdir is removed afterwards unless `--keep`."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path(workdir))
    parser.add_argument("--root-mb", type=float, default=500.0)
    parser.add_argument("--synthetic-nodes", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=repeat)
    parser.add_argument("--keep", action="store_true", help="Keep the workdir afterwards.")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    try:
        url = (build_synthetic(args.workdir, args.synthetic_nodes) if args.synthetic_nodes
               else build_from_root(args.workdir, args.root_mb))
        yield url, args
    finally:
        if not args.keep:
            shutil.rmtree(args.workdir, ignore_errors=True)
