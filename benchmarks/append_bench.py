"""What a small write costs: a 2-node run ingested into a large warehouse by this code (payloads
without a key), with a checkpoint at every writer's close ("eager") and with small writes left
in the WAL ("lazy", warehouse/db.py LAZY_CHECKPOINT_BYTES), against the code before it
(`--baseline-python`: a keyed node_payloads, eager), alternated in the same run; the baseline
on a copy of its own. What a reader pays for the WAL is measured beside it.

    python benchmarks/append_bench.py --db WAREHOUSE.duckdb --base BASE --work DIR \\
        --baseline-python /path/to/old/venv/bin/python [--runs 8]

WAREHOUSE is a warehouse at the baseline code's head (0010; e.g. one `scale_bench.py --keep`
left); it is copied into DIR and never written. One copy stays for the baseline; another is
upgraded to this code's head (migration 0011: seconds and peak RSS) and copied once more, so
that each variant writes a copy of its own (the lazy one's WAL grows run by run up to the
checkpoint that writes it in: --runs 10 takes it past 16 MB once). BASE is the
scale benchmark's generated root (the folder holding its run `20260801_000000_bench`), from
which each 2-node run is cut under a run id of its own. Each stage runs in a fresh process
(cold caches of the process, warm page cache of the machine). A write's cost depends on how
full the payloads' last row group is, not on the warehouse's size: the tail is printed.
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def stage(name: str, url: str, arg: str) -> dict:
    if name in ("append", "append_eager"):
        import warehouse.db
        from ingest.pipeline import ingest_roots

        if name == "append_eager":  # every close checkpoints, whatever the WAL holds
            warehouse.db.LAZY_CHECKPOINT_BYTES = 0

        t0 = time.perf_counter()
        report = ingest_roots(url, [arg])
        assert report.files_failed == 0 and report.rows == 2, report
        return {"s": time.perf_counter() - t0, "peak_mb": _peak_mb()}
    if name == "read":  # what a command that only reads pays: open, replay the WAL, count
        from warehouse.query import list_tables

        t0 = time.perf_counter()
        list_tables(url)
        return {"s": time.perf_counter() - t0, "peak_mb": _peak_mb()}
    if name == "upgrade":
        from warehouse.migrate import upgrade

        t0 = time.perf_counter()
        upgrade(url)
        return {"s": time.perf_counter() - t0, "peak_mb": _peak_mb()}
    if name == "tail":
        import warehouse.db

        with warehouse.db.connect(url, read_only=True) as con:
            n = con.execute('SELECT count(*) FROM "node_payloads"').fetchone()[0]
        return {"payloads": n, "tail": n % 2048}
    raise ValueError(name)


def _run(python: str, name: str, url: str, arg: str = "") -> dict:
    done = subprocess.run([python, __file__, "--stage", name, url, arg], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{name} with {python} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _two_node_run(base: Path, work: Path, run_id: str) -> str:
    sys.path.insert(0, str(Path(__file__).parent))
    from scale_bench import _copy_root

    out = work / f"root_{run_id}"
    shutil.rmtree(out, ignore_errors=True)
    _copy_root(base, out, run_id, files=1, lines=2)
    return str(out)


def _wal_mb(path: Path) -> float:
    wal = Path(f"{path}.wal")
    return wal.stat().st_size / 1e6 if wal.exists() else 0.0


def _copy(src: Path, dst: Path) -> None:
    for suffix in ("", ".wal"):
        Path(f"{dst}{suffix}").unlink(missing_ok=True)
        if Path(f"{src}{suffix}").exists():
            shutil.copyfile(f"{src}{suffix}", f"{dst}{suffix}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--stage":
        print(json.dumps(stage(sys.argv[2], sys.argv[3], sys.argv[4])))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--db", required=True, type=Path)
    p.add_argument("--base", required=True, type=Path)
    p.add_argument("--work", required=True, type=Path)
    p.add_argument("--baseline-python", required=True)
    p.add_argument("--runs", type=int, default=10, help="2-node runs per variant (alternated)")
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    copies = {"baseline": args.work / "append_baseline.duckdb", "keyless, eager": args.work / "append_eager.duckdb",
              "keyless, lazy": args.work / "append_lazy.duckdb"}
    _copy(args.db, copies["baseline"])
    _copy(args.db, copies["keyless, eager"])
    urls = {label: f"duckdb:///{copy}" for label, copy in copies.items()}
    tail = _run(args.baseline_python, "tail", urls["baseline"])
    print(f"warehouse: {args.db.stat().st_size / 1e9:.2f} GB, {tail['payloads']:,} payloads, "
          f"{tail['tail']:,} in the last row group", flush=True)
    up = _run(sys.executable, "upgrade", urls["keyless, eager"])
    print(f"migration to this code's head: {up['s']:.1f} s, peak RSS {up['peak_mb']:,.0f} MB", flush=True)
    _copy(copies["keyless, eager"], copies["keyless, lazy"])
    # each variant on its own copy, so the lazy one's WAL grows as a user's would, up to the
    # checkpoint that writes it in; the variants alternate run by run
    variants = [("baseline", args.baseline_python, "append"),
                ("keyless, eager", sys.executable, "append_eager"),
                ("keyless, lazy", sys.executable, "append")]
    times = {v[0]: [] for v in variants}
    reads = {v[0]: [] for v in variants}
    for i in range(args.runs):
        for k, (label, python, name) in enumerate(variants):
            root = _two_node_run(args.base, args.work, f"20261207_{i:03d}{k}_append")
            out = _run(python, name, urls[label], root)
            shutil.rmtree(root)
            read = _run(python, "read", urls[label])
            times[label].append(out["s"])
            reads[label].append(read["s"])
            print(f"  {label}: 2-node run {out['s']:.2f} s (peak {out['peak_mb']:,.0f} MB), WAL after "
                  f"{_wal_mb(copies[label]):.2f} MB, then `warehouse tables` {read['s']:.2f} s", flush=True)
    for what, figures in (("2-node run", times), ("`warehouse tables` after it", reads)):
        base = statistics.mean(figures["baseline"])
        print(f"{what}, {args.runs} each: " + "; ".join(
            f"{label} mean {statistics.mean(f):.2f} s, median {statistics.median(f):.2f} s, max {max(f):.2f} s"
            + ("" if label == "baseline" else f" (mean {statistics.mean(f) / base:.3f}x baseline)")
            for label, f in figures.items()))
    for copy in copies.values():  # the copies and their WALs
        for suffix in ("", ".wal"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
