"""`warehouse tables` on a DuckLake: this code against an earlier checkout, interleaved.

Each repetition runs `warehouse --db URL tables` as a fresh process (what a person waits
for: Python's start, the imports, attaching the lake, listing and counting, printing) once
with an earlier checkout of the package (`--before DIR`, put first on PYTHONPATH) and once
with this one, in turn, and prints each one's median and range. With `--phases` each process
also times the parts of its `list_tables` (attaching the lake, the schema check, listing,
counting) and the medians of those are printed too.

`--build DIR` first makes the lake as `scale_bench.py --layouts ducklake` makes its own: one
generated 000-style root of `--size-mb` MB (node files of about `--file-mb` MB), ingested
`--copies` times under distinct run ids into a DuckLake with a SQLite catalog. Usage::

    git worktree add /tmp/before fe38563   (or: git archive fe38563 | tar -x -C /tmp/before)
    python benchmarks/lake_tables_bench.py --build /tmp/lake --copies 10 --before /tmp/before --repeat 7
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

# run in the measured process with --phases: list_tables' parts, timed by wrapping what it calls
PHASES = r'''
import json, sys, time
import warehouse.db as db, warehouse.query as query, warehouse.revision as revision
spent = {}
def timed(name, fn):
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0
    return wrapper
db.lake_connection = timed("attach", db.lake_connection)
revision.require_head = timed("schema check", revision.require_head)
t0 = time.perf_counter()
query.list_tables(sys.argv[1])
spent["list_tables"] = time.perf_counter() - t0
spent["listing and counting"] = spent["list_tables"] - spent["attach"] - spent["schema check"]
print(json.dumps(spent))
'''


def build(folder: Path, size_mb: float, file_mb: float, copies: int) -> str:
    """A DuckLake of `copies` copies of one generated root, as scale_bench.py builds its own."""
    from ingest.pipeline import ingest_roots
    from ingest.sample import write_bench_root
    from warehouse.config import resolve_db_url
    from warehouse.migrate import init_db

    folder.mkdir(parents=True, exist_ok=True)
    base = folder / "base"
    shutil.rmtree(base, ignore_errors=True)
    write_bench_root(base, target_mb=size_mb, file_mb=file_mb)
    (run,) = [p for p in base.iterdir() if p.is_dir()]
    url = resolve_db_url(f"ducklake:sqlite:{folder / 'lake.sqlite'}", folder / "lake_files")
    init_db(url)
    for copy in range(1, copies + 1):
        root = folder / f"root_{copy}"
        shutil.rmtree(root, ignore_errors=True)
        for src in run.rglob("*.jsonl"):  # the run under its own id (hard links)
            dst = root / f"20260801_{copy:06d}_bench" / src.relative_to(run)
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.link(src, dst)
        t0 = time.perf_counter()
        report = ingest_roots(url, [str(root)])
        assert report.files_failed == 0, report
        print(f"copy {copy}: ingested in {time.perf_counter() - t0:.1f} s", flush=True)
        shutil.rmtree(root)
    shutil.rmtree(base)
    return url


def run(url: str, tree: Path | None, phases: bool) -> tuple[float, dict]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    command = ([sys.executable, "-c", PHASES, url] if phases else
               [sys.executable, "-c", "from warehouse.cli import main; main()", "--db", url, "tables"])
    t0 = time.perf_counter()
    done = subprocess.run(command, env=env, cwd="/", capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:2])} ... failed:\n{done.stderr}")
    return seconds, json.loads(done.stdout) if phases else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="the DuckLake URL (or --build one)")
    parser.add_argument("--build", type=Path, help="make the lake in this folder first")
    parser.add_argument("--size-mb", type=float, default=30.0)
    parser.add_argument("--file-mb", type=float, default=0.5)
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the earlier code")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--phases", action="store_true", help="also time list_tables' parts in-process")
    args = parser.parse_args()
    if not (args.before / "warehouse" / "db.py").is_file():
        parser.error(f"--before {args.before}: no warehouse/db.py there (give a checkout of the package)")
    url = build(args.build, args.size_mb, args.file_mb, args.copies) if args.build else args.db
    if not url:
        parser.error("give --db URL or --build DIR")
    codes = {"before": args.before, "now": None}
    seconds = {name: [] for name in codes}
    parts: dict[str, dict[str, list[float]]] = {name: {} for name in codes}
    for _ in range(args.repeat):
        for name, tree in codes.items():
            took, _ = run(url, tree, False)
            seconds[name].append(took)
            if args.phases:
                for part, value in run(url, tree, True)[1].items():
                    parts[name].setdefault(part, []).append(value)
    print(f"`warehouse --db {url} tables`, {args.repeat} runs each, interleaved")
    print("| code | command, median s | min-max s |" + "".join(f" {p}, median s |" for p in parts["now"]))
    print("|---|---|---|" + "---|" * len(parts["now"]))
    for name, times in seconds.items():
        cells = "".join(f" {statistics.median(parts[name][p]):.3f} |" if p in parts[name] else " |"
                        for p in parts["now"])
        print(f"| {name} | {statistics.median(times):.3f} | {min(times):.3f}-{max(times):.3f} |{cells}")


if __name__ == "__main__":
    main()
