"""Warehouses the benchmarks measure: built from a generated data root, or empty."""
from __future__ import annotations

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
    """Write a `root_mb` data root (2-12 MB node files, like the seeds') and ingest it."""
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
