"""Scale benchmark: what adding a run costs as the warehouse grows (issue 40).

    python benchmarks/scale_bench.py [--size-mb 30] [--file-mb 1] [--scale 1,10] [--work DIR]
                                     [--layouts 2048,122880] [--export]

Workload: one generated 000-style root of `--size-mb` MB (`ingest.sample.write_bench_root`,
node files of about `--file-mb` MB, 16 nodes each), copied (hard links) under distinct run ids.
For each layout (the row-group size a writer attaches the file with: 2048 is this version's,
122880 DuckDB's default, the layout before it) a fresh warehouse file takes copy after copy;
at each scale S of `--scale` (S copies held) it measures, each stage in a process of its own
so that its peak RSS is its own:

* root: the S-th copy's ingest (into the warehouse of S-1 copies; at 1x, into an empty one);
* two-node run: a run of one task-round with 2 nodes, ingested into the warehouse of S copies
  (what a trainer's round commit costs);
* tables: `warehouse tables` (every relation's row count);
* token search: one token id across all runs through `node_tokens`;
* export (with `--export`): `warehouse export` of the whole warehouse;
* the file's size against the node JSONL it holds, and at the largest scale after
  `warehouse compact`.

Every figure is printed with its growth factor against 1x of the same layout, and the
layouts' ratio at each scale. DuckLake is not measured here: it writes Parquet files per commit
and keeps no row groups to rewrite (docs/ducklake.md).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

BASE_RUN = "20260801_000000_bench"
TOKEN_QUERY = 'SELECT count(*) FROM "node_tokens" WHERE "token_id" = 4242'


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _use_layout(row_group_size: int) -> None:
    import warehouse.db

    warehouse.db.ROW_GROUP_SIZE = row_group_size


def _init(row_group_size: int, url: str) -> None:
    from warehouse.migrate import init_db

    _use_layout(row_group_size)
    init_db(url)


def _ingest(row_group_size: int, url: str, root: str) -> tuple[float, float]:
    from ingest.pipeline import ingest_roots

    _use_layout(row_group_size)
    t0 = time.perf_counter()
    report = ingest_roots(url, [root])
    assert report.files_failed == 0, report
    return time.perf_counter() - t0, _peak_mb()


def _tables(url: str) -> tuple[float, float]:
    from warehouse.query import list_tables

    t0 = time.perf_counter()
    list_tables(url)
    return time.perf_counter() - t0, _peak_mb()


def _token_search(url: str) -> tuple[float, float]:
    from warehouse.db import connect

    with connect(url, read_only=True) as con:
        t0 = time.perf_counter()
        con.execute(TOKEN_QUERY).fetchone()
        return time.perf_counter() - t0, _peak_mb()


def _export(url: str, out: str) -> tuple[float, float]:
    from warehouse.export import export_parquet

    t0 = time.perf_counter()
    export_parquet(url, out, overwrite=True)
    return time.perf_counter() - t0, _peak_mb()


def _compact(url: str) -> tuple[float, float]:
    from warehouse.maintenance import compact

    t0 = time.perf_counter()
    compact(url)
    return time.perf_counter() - t0, _peak_mb()


def _in_own_process(fn, *args):
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


# --- the roots ---------------------------------------------------------------------------

def _copy_root(base: Path, out: Path, run_id: str, files: int | None = None, lines: int | None = None) -> int:
    """`base`'s run under `run_id` (hard links), or its first `files` files cut to `lines`
    lines; returns the node bytes written."""
    src_run = base / BASE_RUN
    total = 0
    for i, src in enumerate(sorted(src_run.rglob("*.jsonl"))):
        if files is not None and i >= files:
            break
        dst = out / run_id / src.relative_to(src_run)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if lines is None:
            os.link(src, dst)
        else:
            with src.open("rb") as f:
                dst.write_bytes(b"".join(f.readline() for _ in range(lines)))
        total += dst.stat().st_size
    return total


# --- one layout --------------------------------------------------------------------------

def measure_layout(row_group_size: int, base: Path, work: Path, scales: list[int],
                   export: bool) -> dict[int, dict[str, float]]:
    db = work / f"rg{row_group_size}.duckdb"
    for p in (db, Path(f"{db}.wal")):
        p.unlink(missing_ok=True)
    url = f"duckdb:///{db}"
    _in_own_process(_init, row_group_size, url)
    held, results = 0, {}
    for copy in range(1, max(scales) + 1):
        root = work / f"root_{copy}"
        shutil.rmtree(root, ignore_errors=True)
        held += _copy_root(base, root, f"20260801_{copy:06d}_bench")
        seconds, rss = _in_own_process(_ingest, row_group_size, url, str(root))
        shutil.rmtree(root)
        if copy not in scales:
            continue
        row = results[copy] = {"root_s": seconds, "root_rss_mb": rss}
        two = work / f"two_{copy}"
        shutil.rmtree(two, ignore_errors=True)
        held += _copy_root(base, two, f"20260802_{copy:06d}_twonode", files=1, lines=2)
        row["two_node_s"], row["two_node_rss_mb"] = _in_own_process(_ingest, row_group_size, url, str(two))
        shutil.rmtree(two)
        row["tables_s"], row["tables_rss_mb"] = _in_own_process(_tables, url)
        row["token_search_s"], row["token_search_rss_mb"] = _in_own_process(_token_search, url)
        if export:
            out = work / "export"
            row["export_s"], row["export_rss_mb"] = _in_own_process(_export, url, str(out))
            shutil.rmtree(out)
        row["file_mb"] = db.stat().st_size / 1e6
        row["jsonl_mb"] = held / 1e6
        row["file_vs_jsonl"] = row["file_mb"] / row["jsonl_mb"]
        if copy == max(scales):  # compacting earlier would change what the later copies meet
            row["compact_s"], row["compact_rss_mb"] = _in_own_process(_compact, url)
            row["compacted_vs_jsonl"] = db.stat().st_size / 1e6 / row["jsonl_mb"]
        print(f"  rg{row_group_size} {copy}x: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()), flush=True)
    db.unlink()
    return results


def print_table(results: dict[int, dict[int, dict[str, float]]], scales: list[int]) -> None:
    ours, *others = list(results)
    keys = list(results[ours][scales[-1]])
    head = ["figure"] + [f"rg{lay} {s}x" for lay in results for s in scales]
    head += [f"rg{lay} {s}x/1x" for lay in results for s in scales[1:]]
    head += [f"rg{ours}/rg{o} {s}x" for o in others for s in scales]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in keys:
        cells = [_cell(results[lay][s].get(key)) for lay in results for s in scales]
        cells += [_ratio(results[lay][s].get(key), results[lay][scales[0]].get(key), "x")
                  for lay in results for s in scales[1:]]
        cells += [_ratio(results[ours][s].get(key), results[o][s].get(key)) for o in others for s in scales]
        print(f"| {key} | " + " | ".join(cells) + " |")


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _ratio(a: float | None, b: float | None, unit: str = "") -> str:
    return "" if a is None or not b else f"{a / b:.2f}{unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=30.0, help="the root's size (1x)")
    parser.add_argument("--file-mb", type=float, default=1.0, help="about how large a node file is")
    parser.add_argument("--scale", default="1,10", help="scales to measure, in copies of the root")
    parser.add_argument("--layouts", default="2048,122880", help="row-group sizes; the first is ours")
    parser.add_argument("--export", action="store_true", help="also time `warehouse export`")
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    scales = sorted({int(s) for s in args.scale.split(",")})
    work = args.work or Path(tempfile.mkdtemp(prefix="scale_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    from ingest.sample import write_bench_root

    base = work / "base"
    shutil.rmtree(base, ignore_errors=True)
    write_bench_root(base, target_mb=args.size_mb, file_mb=args.file_mb)
    size = sum(p.stat().st_size for p in base.rglob("*.jsonl")) / 1e6
    nodes = sum(1 for p in base.rglob("*.jsonl") for _ in p.open("rb"))
    print(f"root: {size:.1f} MB of node JSONL, {nodes} nodes; scales {scales}; work {work}", flush=True)
    results = {}
    for layout in (int(x) for x in args.layouts.split(",")):
        results[layout] = measure_layout(layout, base, work, scales, args.export)
    print_table(results, scales)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
