"""The dashboard's compare page on warehouses of growing size, against an earlier
`warehouse/serve/data.py`, interleaved.

Each warehouse file (the first is the baseline the others' growth is measured against, e.g.
the 1x and 10x files `scale_bench.py --keep` leaves) is served by the dashboard through
Starlette's test client; each repetition fetches `/compare?run=FIRST&run=LAST` (the page
`scale_bench.py --pages` times) once with the earlier module's `compare_page` and once with
this one's, in turn, after one warm-up request of each. It prints each one's median and range
per warehouse, and each warehouse's median against the first's (a ratio measured in the same
run, so the machine's load cancels out). Usage::

    python benchmarks/scale_bench.py --size-mb 30 --file-mb 0.1 --scale 1,10 --layouts 2048 --keep --work /tmp/sb
    git show fe38563:warehouse/serve/data.py > /tmp/data_before.py
    python benchmarks/compare_bench.py --before /tmp/data_before.py --repeat 9 \\
        /tmp/sb/rg2048_1x.duckdb /tmp/sb/rg2048.duckdb
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import statistics
import sys
import time
from pathlib import Path


def earlier_module(path: Path):
    spec = importlib.util.spec_from_file_location("warehouse.serve._data_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def compare_page_of(module):
    """The app's compare page answered by `module.compare_page` (the app calls data.compare_page)."""
    from warehouse.serve import data

    ours = data.compare_page
    data.compare_page = module.compare_page
    try:
        yield
    finally:
        data.compare_page = ours


def measure(path: Path, codes: dict, repeat: int) -> dict[str, list[float]]:
    from starlette.testclient import TestClient

    from warehouse.db import connect
    from warehouse.serve.app import create_app

    url = f"duckdb:///{path}"
    with connect(url, read_only=True) as con:
        runs = [r for (r,) in con.execute('SELECT "run_id" FROM "runs" ORDER BY 1').fetchall()]
        nodes = con.execute('SELECT count(*) FROM "nodes"').fetchone()[0]
    page = f"/compare?run={runs[0]}&run={runs[-1]}"
    print(f"{path.name}: {len(runs)} runs, {nodes} nodes", flush=True)
    seconds: dict[str, list[float]] = {name: [] for name in codes}
    with TestClient(create_app(url)) as client:
        for i in range(repeat + 1):
            for name, module in codes.items():
                with compare_page_of(module):
                    t0 = time.perf_counter()
                    answer = client.get(page)
                    took = time.perf_counter() - t0
                assert answer.status_code == 200, (name, page, answer.status_code)
                if i:  # the first round warms up
                    seconds[name].append(took)
    return seconds


def main() -> None:
    from warehouse.serve import data

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="an earlier warehouse/serve/data.py")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("warehouses", type=Path, nargs="+", help="warehouse files, the baseline first")
    args = parser.parse_args()
    codes = {"before": earlier_module(args.before), "now": data}
    results = {path: measure(path, codes, args.repeat) for path in args.warehouses}
    base = statistics.median
    first = results[args.warehouses[0]]
    print("| warehouse | code | median s | min-max s | median / first warehouse's |")
    print("|---|---|---|---|---|")
    for path, by_code in results.items():
        for name, times in by_code.items():
            print(f"| {path.name} | {name} | {base(times):.3f} | {min(times):.3f}-{max(times):.3f} | "
                  f"{base(times) / base(first[name]):.2f}x |")


if __name__ == "__main__":
    main()
