"""Ingest benchmark: our `warehouse ingest` against DuckDB's raw read_json and a naive loader.

    python benchmarks/ingest_bench.py [--size-mb 500] [--naive-mb 100] [--repeat N] [--work DIR]
    python benchmarks/ingest_bench.py --sweep [--sweep-mb 60] [--repeat N] [--work DIR]

Generates a 000-style root of 2-12 MB node files (`ingest.sample.write_bench_root`), then
measures, in the same run and each in its own process (so peak RSS is that stage's own):

* ours: `ingest_roots` into a fresh warehouse (MB/s of node-file bytes, peak RSS);
* re-ingest of the unchanged root (the hash/mtime check only);
* ceiling: DuckDB `read_json` of the same files into one table in a fresh database file;
* naive: `json.loads` per line + `executemany` INSERT (what a user would write), on the
  first `--naive-mb` of files (it is slow), reported as MB/s;
* the warehouse file size against the raw JSONL bytes.

Targets (issue 3): ours >= 0.7 x read_json and >= 10 x naive, peak RSS < 2 GB, re-ingest
< 2 s, warehouse <= raw bytes.

`--sweep`: the cost is partly per file, so the ratio to read_json depends on the file size.
For node files of about 0.6, 1.4, 3 and 8 MB (the published data roots' rounds are 2.6-11 MB for 4 tasks,
so their node files are 0.6-3 MB), a root of `--sweep-mb` MB each: ours and read_json on
the same files (interleaved `--repeat` times; the median ratio), and both peak RSS.
Target (issue 15): ours >= 0.7 x read_json at every size.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _cpu() -> float:
    """CPU seconds of this process, all threads (fairer than wall time on a shared machine)."""
    return time.process_time()


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _files(root: Path) -> list[str]:
    return sorted(str(p) for p in root.glob("*/round_*/*.jsonl"))


# --- stages (each runs in a child process) ---------------------------------------------------

def stage_ours(root: str, db: str, queue) -> None:
    from ingest.pipeline import ingest_roots
    from warehouse.migrate import init_db

    url = f"duckdb:///{db}"
    init_db(url)
    started, cpu = time.perf_counter(), _cpu()
    report = ingest_roots(url, [root])
    seconds = time.perf_counter() - started
    queue.put({"seconds": seconds, "cpu": _cpu() - cpu, "rss_mb": _rss_mb(),
               "rows": report.rows, "rejected": report.rows_rejected})


def stage_reingest(root: str, db: str, queue) -> None:
    import warehouse.migrate  # noqa: F401 - imports are not part of the hash check
    from ingest.pipeline import ingest_roots

    started = time.perf_counter()
    report = ingest_roots(f"duckdb:///{db}", [root])
    queue.put({"seconds": time.perf_counter() - started, "rss_mb": _rss_mb(),
               "loaded": report.files_loaded})


def stage_read_json(files: list[str], db: str, queue) -> None:
    import duckdb

    con = duckdb.connect(db)
    started, cpu = time.perf_counter(), _cpu()
    con.execute("CREATE TABLE raw AS SELECT * FROM read_json(?, format = 'newline_delimited', "
                "maximum_object_size = 268435456)", [files])
    con.close()
    queue.put({"seconds": time.perf_counter() - started, "cpu": _cpu() - cpu,
               "rss_mb": _rss_mb()})


NAIVE_COLUMNS = {
    "id": "VARCHAR", "step": "INTEGER", "round": "INTEGER", "exp_id": "VARCHAR",
    "parent_id": "VARCHAR", "sibling_group": "VARCHAR", "mode": "VARCHAR", "plan": "VARCHAR",
    "code": "VARCHAR", "raw_completion": "VARCHAR", "thinking": "VARCHAR",
    "prompt_messages": "JSON", "response_token_ids": "INTEGER[]",
    "response_logprobs": "DOUBLE[]", "exc_type": "VARCHAR", "exec_time": "DOUBLE",
    "term_tail": "VARCHAR", "is_buggy": "BOOLEAN", "status": "VARCHAR",
    "grade_error": "VARCHAR", "test_metric": "DOUBLE", "oriented": "DOUBLE", "reward": "DOUBLE",
    "source": "VARCHAR", "n_children": "INTEGER", "rest": "JSON",
}


def stage_naive(files: list[str], db: str, queue) -> None:
    import duckdb

    con = duckdb.connect(db)
    cols = ", ".join(f'"{k}" {t}' for k, t in NAIVE_COLUMNS.items())
    con.execute(f"CREATE TABLE nodes ({cols})")
    marks = ", ".join("?" for _ in NAIVE_COLUMNS)
    started, cpu = time.perf_counter(), _cpu()
    for path in files:
        batch = []
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
                row = [rec.pop(k, None) for k in list(NAIVE_COLUMNS)[:-1]]
                row[11] = json.dumps(row[11])
                batch.append(row + [json.dumps(rec)])
        con.executemany(f"INSERT INTO nodes VALUES ({marks})", batch)
    con.close()
    queue.put({"seconds": time.perf_counter() - started, "cpu": _cpu() - cpu,
               "rss_mb": _rss_mb()})


def _in_child(target, *args) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


# --- the run ---------------------------------------------------------------------------------

def ensure_root(work: Path, size_mb: float, seed: int, file_mb: float | None = None) -> Path:
    from ingest.sample import write_bench_root

    root = work / (f"root_{int(size_mb)}mb_seed{seed}" + (f"_files{file_mb}mb" if file_mb else ""))
    marker = root / ".complete"
    if not marker.exists():
        shutil.rmtree(root, ignore_errors=True)
        started = time.perf_counter()
        write_bench_root(root, target_mb=size_mb, seed=seed, file_mb=file_mb)
        marker.write_text("ok")
        print(f"generated {root} in {time.perf_counter() - started:.0f} s")
    return root


def _subset(files: list[str], limit_mb: float) -> list[str]:
    out, total = [], 0
    for path in files:
        if out and total + os.path.getsize(path) > limit_mb * 1e6:
            break
        out.append(path)
        total += os.path.getsize(path)
    return out


def run(size_mb: float, naive_mb: float, work: Path, seed: int, repeat: int = 1) -> dict:
    root = ensure_root(work, size_mb, seed)
    files = _files(root)
    raw_mb = sum(os.path.getsize(f) for f in files) / 1e6
    naive_files = _subset(files, naive_mb)
    naive_raw_mb = sum(os.path.getsize(f) for f in naive_files) / 1e6
    dbs = {name: work / f"{name}.duckdb" for name in ("ours", "read_json", "naive")}
    rounds = []
    for _ in range(repeat):  # interleaved, so a burst of load on the machine hits all three
        for db in dbs.values():
            for suffix in ("", ".wal"):
                Path(str(db) + suffix).unlink(missing_ok=True)
        ceiling = _in_child(stage_read_json, files, str(dbs["read_json"]))
        ours = _in_child(stage_ours, str(root), str(dbs["ours"]))
        naive = _in_child(stage_naive, naive_files, str(dbs["naive"]))
        rounds.append({"ours_over_read_json": ceiling["seconds"] / ours["seconds"],
                       "ours_over_naive": (naive["seconds"] / naive_raw_mb)
                       / (ours["seconds"] / raw_mb),
                       "read_json_over_naive": (naive["seconds"] / naive_raw_mb)
                       / (ceiling["seconds"] / raw_mb)})
    again = _in_child(stage_reingest, str(root), str(dbs["ours"]))
    return {
        "rounds": rounds,
        "files": len(files), "raw_mb": raw_mb, "rows": ours["rows"],
        "ours_mb_s": raw_mb / ours["seconds"], "ours_s": ours["seconds"],
        "ours_rss_mb": ours["rss_mb"], "ours_cpu_s": ours["cpu"],
        "read_json_cpu_s": ceiling["cpu"], "naive_cpu_s": naive["cpu"],
        "read_json_mb_s": raw_mb / ceiling["seconds"], "read_json_s": ceiling["seconds"],
        "read_json_rss_mb": ceiling["rss_mb"],
        "naive_mb_s": naive_raw_mb / naive["seconds"], "naive_s": naive["seconds"],
        "naive_raw_mb": naive_raw_mb,
        "reingest_s": again["seconds"], "reingest_loaded": again["loaded"],
        "warehouse_mb": os.path.getsize(dbs["ours"]) / 1e6,
        "read_json_db_mb": os.path.getsize(dbs["read_json"]) / 1e6,
    }


SWEEP_FILE_MB = (0.6, 1.4, 3.0, 8.0)


def sweep(total_mb: float, work: Path, seed: int, repeat: int = 1) -> list[dict]:
    """Per node-file size: ours and read_json on the same root of `total_mb` MB."""
    out = []
    for file_mb in SWEEP_FILE_MB:
        root = ensure_root(work, total_mb, seed, file_mb)
        files = _files(root)
        raw_mb = sum(os.path.getsize(f) for f in files) / 1e6
        dbs = {name: work / f"sweep_{name}.duckdb" for name in ("ours", "read_json")}
        rounds = []
        for _ in range(repeat):  # interleaved, so a burst of load on the machine hits both
            for db in dbs.values():
                for suffix in ("", ".wal"):
                    Path(str(db) + suffix).unlink(missing_ok=True)
            ceiling = _in_child(stage_read_json, files, str(dbs["read_json"]))
            ours = _in_child(stage_ours, str(root), str(dbs["ours"]))
            rounds.append((ceiling, ours))
        ratios = sorted(c["seconds"] / o["seconds"] for c, o in rounds)
        ceiling, ours = rounds[-1]
        out.append({"file_mb": raw_mb / len(files), "files": len(files), "raw_mb": raw_mb,
                    "ours_mb_s": raw_mb / ours["seconds"], "read_json_mb_s": raw_mb / ceiling["seconds"],
                    "ratio": statistics.median(ratios), "ratios": ratios,
                    "cpu_ratio": statistics.median(c["cpu"] / o["cpu"] for c, o in rounds),
                    "ours_rss_mb": max(o["rss_mb"] for _, o in rounds),
                    "read_json_rss_mb": max(c["rss_mb"] for c, _ in rounds)})
    return out


def render_sweep(rows: list[dict]) -> str:
    lines = ["node file  files  raw MB  ours MB/s  read_json MB/s  ours/read_json (rounds)  "
             "by CPU  peak RSS ours / read_json"]
    for r in rows:
        lines.append(f"{r['file_mb']:6.2f} MB  {r['files']:5d}  {r['raw_mb']:6.0f}  {r['ours_mb_s']:9.1f}  "
                     f"{r['read_json_mb_s']:14.1f}  {r['ratio']:5.2f} ({', '.join(f'{v:.2f}' for v in r['ratios'])})"
                     f"  {r['cpu_ratio']:6.2f}  {r['ours_rss_mb']:.0f} / {r['read_json_rss_mb']:.0f} MB")
    lines.append("target: ours / read_json >= 0.7 at every size")
    return "\n".join(lines)


def render(r: dict) -> str:
    lines = [
        f"root: {r['files']} node files, {r['raw_mb']:.0f} MB raw JSONL, {r['rows']} records",
        f"ours (warehouse ingest)   {r['ours_mb_s']:8.1f} MB/s  ({r['ours_s']:.1f} s, "
        f"peak RSS {r['ours_rss_mb']:.0f} MB)",
        f"DuckDB read_json ceiling  {r['read_json_mb_s']:8.1f} MB/s  ({r['read_json_s']:.1f} s, "
        f"peak RSS {r['read_json_rss_mb']:.0f} MB)",
        f"naive json.loads+executemany {r['naive_mb_s']:5.1f} MB/s  ({r['naive_s']:.1f} s on "
        f"the first {r['naive_raw_mb']:.0f} MB)",
        f"ours / read_json          {r['ours_mb_s'] / r['read_json_mb_s']:8.2f}   (target >= 0.7)",
        f"ours / naive              {r['ours_mb_s'] / r['naive_mb_s']:8.1f}x  (target >= 10)",
        f"by CPU seconds per MB (all threads; steadier on a shared machine): ours / read_json "
        f"{(r['read_json_cpu_s'] / r['raw_mb']) / (r['ours_cpu_s'] / r['raw_mb']):.2f}, "
        f"ours / naive {(r['naive_cpu_s'] / r['naive_raw_mb']) / (r['ours_cpu_s'] / r['raw_mb']):.1f}x",
        f"re-ingest unchanged root  {r['reingest_s']:8.2f} s  ({r['reingest_loaded']} files "
        "reloaded; target < 2 s)",
        f"warehouse / raw bytes     {r['warehouse_mb'] / r['raw_mb']:8.2f}   "
        f"({r['warehouse_mb']:.0f} MB; read_json's table file {r['read_json_db_mb']:.0f} MB; "
        "target <= 1)",
        f"peak RSS                  {r['ours_rss_mb']:8.0f} MB  (target < 2048)",
        f"read_json / naive         {r['read_json_mb_s'] / r['naive_mb_s']:8.1f}x  (the ceiling "
        "over the naive loader: ours cannot beat this)",
    ]
    if len(r["rounds"]) > 1:
        for key in ("ours_over_read_json", "ours_over_naive", "read_json_over_naive"):
            values = sorted(x[key] for x in r["rounds"])
            lines.append(f"{key:26s}per round: {', '.join(f'{v:.2f}' for v in values)}; "
                         f"median {statistics.median(values):.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=500)
    parser.add_argument("--naive-mb", type=float, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1,
                        help="Rounds of read_json, ours, naive, interleaved (figures: the last).")
    parser.add_argument("--work", type=Path, default=None,
                        help="Where the root and databases go (default: a temp dir, removed).")
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON too.")
    parser.add_argument("--sweep", action="store_true",
                        help=f"Ours against read_json at node files of {', '.join(map(str, SWEEP_FILE_MB))} MB.")
    parser.add_argument("--sweep-mb", type=float, default=60, help="Root size per file size of --sweep.")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="ingest-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.sweep:
            result = sweep(args.sweep_mb, work, args.seed, args.repeat)
        else:
            result = run(args.size_mb, args.naive_mb, work, args.seed, args.repeat)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(render_sweep(result) if args.sweep else render(result))
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
