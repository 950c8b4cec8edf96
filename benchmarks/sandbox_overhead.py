"""Per-node overhead of the sandbox: the allow-list (bubblewrap) against the deny-list fallback.

A node whose solution is ``pass`` runs ``--nodes`` times one after another through
``run_job`` in each mode; the wall time per node (stage + exec + retrieve) is everything the
sandbox costs, since the solution itself does nothing. ``--public-mb N`` adds an N MB file to
a copy of the task's public data: the fallback copies it into every workspace, bubblewrap
binds it read-only. Run on an idle machine:

    python benchmarks/sandbox_overhead.py --nodes 20
    python benchmarks/sandbox_overhead.py --nodes 10 --public-mb 500
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from train.env import Limits, SandboxJob, capabilities, load_task, run_job


def per_node_seconds(task, limits: Limits, nodes: int) -> list[float]:
    times = []
    for _ in range(nodes):
        job = SandboxJob(code="pass\n", public_dir=str(task.public_dir), hidden_dirs=(str(task.root.parent),),
                         limits=limits)
        start = time.perf_counter()
        result = run_job(job)
        times.append(time.perf_counter() - start)
        assert result.outcome == "exited" and result.returncode == 0, result.term_tail
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--task", default="mini-tabular-accuracy")
    parser.add_argument("--public-mb", type=int, default=0, help="extra public data per task, in MB")
    args = parser.parse_args()
    caps = capabilities()
    task = load_task(args.task)
    scratch = Path(tempfile.mkdtemp(prefix="overhead-"))
    if args.public_mb:
        shutil.copytree(task.root, scratch / task.name)
        with open(scratch / task.name / "public" / "images.bin", "wb") as fh:
            fh.write(b"\0" * args.public_mb * 2**20)
        task = load_task(task.name, scratch)
    modes = {"deny-list fallback": Limits(allow_list=False)}
    if caps.bwrap:
        modes["bubblewrap allow-list"] = Limits()
    for name, limits in modes.items():
        per_node_seconds(task, limits, 2)  # warm the page cache and the python_dirs probe
        times = per_node_seconds(task, limits, args.nodes)
        print(f"{name:24s} median {statistics.median(times) * 1000:7.1f} ms/node  "
              f"p90 {sorted(times)[int(0.9 * len(times))] * 1000:7.1f} ms  ({args.nodes} nodes, "
              f"{args.public_mb} MB extra public data)")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
