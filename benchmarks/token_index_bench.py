"""Token index layouts on a warehouse of the scale benchmark: one row per (token, node), 0008's,
against one row per (token, write), 0010's, on the same warehouse, measured in the same run.

    python benchmarks/token_index_bench.py --db WAREHOUSE.duckdb --base BASE --work DIR \\
        --baseline-python /path/to/old/venv/bin/python

WAREHOUSE is a warehouse at revision 0008 or 0009 (e.g. one `scale_bench.py --keep` left, its
index one row per token and node); it is copied into DIR and never written. BASE is the scale
benchmark's generated root (the folder holding its run `20260801_000000_bench`), from which a
2-node run is cut. The baseline is the same stages run by `--baseline-python`, an interpreter
whose `warehouse` package is the code before 0010 (its own checkout's venv), on the copy as
it is. Then the copy is upgraded to this code's head (migration 0010: seconds and peak RSS)
and the stages run again with this code. Each stage in a fresh process (cold caches of the
process, warm page cache of the machine):

* token nodes: the nodes holding one id across all runs (`warehouse token ID --nodes`), for
  three ids in one process: the first is the cold figure, the next two the warm;
* a 2-node run ingested (its closing checkpoint included), what a trainer's round commit costs;
* `warehouse tables`.

It prints each figure for both layouts and new/old ratios; the nodes found must be equal.
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

TOKEN_IDS = (4242, 77, 150_001)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def stage(name: str, url: str, arg: str) -> dict:
    if name == "nodes":
        from warehouse.tokens import search_token_nodes

        out = {}
        for i, token_id in enumerate(TOKEN_IDS):
            t0 = time.perf_counter()
            rows = search_token_nodes(url, token_id).rows
            out[f"nodes_{i}_s"] = time.perf_counter() - t0
            out[f"nodes_{i}_found"] = [list(r[:6]) for r in rows]
        return out | {"peak_mb": _peak_mb()}
    if name == "append":
        from ingest.pipeline import ingest_roots

        t0 = time.perf_counter()
        report = ingest_roots(url, [arg])
        assert report.files_failed == 0 and report.rows == 2, report
        return {"append_s": time.perf_counter() - t0, "peak_mb": _peak_mb()}
    if name == "tables":
        from warehouse.query import list_tables

        t0 = time.perf_counter()
        list_tables(url)
        return {"tables_s": time.perf_counter() - t0, "peak_mb": _peak_mb()}
    if name == "upgrade":
        from warehouse.migrate import upgrade

        t0 = time.perf_counter()
        upgrade(url)
        return {"upgrade_s": time.perf_counter() - t0, "peak_mb": _peak_mb()}
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


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--stage":
        print(json.dumps(stage(sys.argv[2], sys.argv[3], sys.argv[4])))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--db", required=True, type=Path)
    p.add_argument("--base", required=True, type=Path)
    p.add_argument("--work", required=True, type=Path)
    p.add_argument("--baseline-python", required=True)
    p.add_argument("--keep", action="store_true", help="keep the upgraded copy (DIR/index_bench.duckdb)")
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    copy = args.work / "index_bench.duckdb"
    shutil.copyfile(args.db, copy)
    url = f"duckdb:///{copy}"
    figures = {}
    for layout, python in (("old", args.baseline_python), ("new", sys.executable)):
        if layout == "new":
            figures["upgrade"] = _run(python, "upgrade", url)
            print(f"migration 0010: {figures['upgrade']['upgrade_s']:.1f} s, "
                  f"peak RSS {figures['upgrade']['peak_mb']:,.0f} MB", flush=True)
        if layout == "old":  # to the baseline code's head (0009: no change to the index)
            _run(python, "upgrade", url)
        two_nodes = _two_node_run(args.base, args.work, f"20261206_00000{len(figures)}_two")
        if layout == "old":  # so that both layouts' searches see the warehouse with one 2-node run
            append = _run(python, "append", url, two_nodes)
        nodes = _run(python, "nodes", url)
        if layout == "new":
            append = _run(python, "append", url, two_nodes)
        tables = _run(python, "tables", url)
        figures[layout] = {"nodes": nodes, "append": append, "tables": tables}
        print(f"{layout}: token nodes cold {nodes['nodes_0_s']:.2f} s, warm {nodes['nodes_1_s']:.2f} / "
              f"{nodes['nodes_2_s']:.2f} s ({len(nodes['nodes_0_found'])} nodes hold {TOKEN_IDS[0]}), "
              f"peak {nodes['peak_mb']:,.0f} MB; 2-node run {append['append_s']:.2f} s, peak "
              f"{append['peak_mb']:,.0f} MB; tables {tables['tables_s']:.2f} s", flush=True)
    old, new = figures["old"], figures["new"]
    for i in range(len(TOKEN_IDS)):
        assert old["nodes"][f"nodes_{i}_found"] == new["nodes"][f"nodes_{i}_found"], TOKEN_IDS[i]
    print("same nodes found for", ", ".join(map(str, TOKEN_IDS)))
    for label, a, b in (("token nodes, cold", old["nodes"]["nodes_0_s"], new["nodes"]["nodes_0_s"]),
                        ("token nodes, warm", old["nodes"]["nodes_1_s"] + old["nodes"]["nodes_2_s"],
                         new["nodes"]["nodes_1_s"] + new["nodes"]["nodes_2_s"]),
                        ("2-node run", old["append"]["append_s"], new["append"]["append_s"]),
                        ("tables", old["tables"]["tables_s"], new["tables"]["tables_s"])):
        print(f"{label}: new/old = {b / a:.3f}x ({a:.2f} s -> {b:.2f} s)")
    if not args.keep:
        copy.unlink()


if __name__ == "__main__":
    main()
