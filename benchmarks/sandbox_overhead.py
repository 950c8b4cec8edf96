"""Per-node overhead of the sandbox: the allow-list (bubblewrap) against the deny-list fallback.

A node whose solution is ``pass`` runs ``--nodes`` times one after another through
``run_job`` in each mode; the wall time per node (stage + exec + retrieve) is everything the
sandbox costs, since the solution itself does nothing. ``--public-mb N`` adds an N MB file to
a copy of the task's public data: the fallback copies it into every workspace, bubblewrap
binds it read-only. Run on an idle machine:

    python benchmarks/sandbox_overhead.py --nodes 20
    python benchmarks/sandbox_overhead.py --nodes 10 --public-mb 500

``--meter`` times instead the watchdog that bounds a node's memory, disk and clock
(``train.env.meter``): one sample of a tree of ``--procs`` processes over a workspace of
``--files`` files, in CPU time, against the interval it is taken at (``Limits.sample_s``):
its share of one core is what watching one node costs.

    python benchmarks/sandbox_overhead.py --meter --procs 8 --files 2000
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


def meter_cost(procs: int, files: int, samples: int = 25) -> None:
    import subprocess
    import sys

    import psutil

    from train.env.meter import NodeMeter

    workspace = Path(tempfile.mkdtemp(prefix="meter-"))
    for i in range(files):
        (workspace / f"f{i // 100}").mkdir(exist_ok=True)
        (workspace / f"f{i // 100}" / f"{i}.bin").write_bytes(b"x" * 4096)
    code = f"import os, time\nfor _ in range({procs - 1}):\n    if os.fork() == 0:\n        break\ntime.sleep(300)\n"
    root = subprocess.Popen([sys.executable, "-c", code])
    try:
        while len(psutil.Process(root.pid).children(recursive=True)) < procs - 1:
            time.sleep(0.05)
        tree = [psutil.Process(root.pid), *psutil.Process(root.pid).children(recursive=True)]
        meter, interval, spent = NodeMeter(workspace), Limits().sample_s, 0.0
        for _ in range(samples):  # at the watch loop's pace: the workspace walk is paced by time
            time.sleep(interval)
            start = time.process_time()
            meter.sample(tree, interval)
            spent += time.process_time() - start
        per_sample = spent / samples
    finally:
        root.kill()
        for p in psutil.Process().children(recursive=True):
            p.kill()
        shutil.rmtree(workspace, ignore_errors=True)
    print(f"meter: {per_sample * 1000:.2f} ms CPU per sample of {procs} processes and {files} files; "
          f"{100 * per_sample / interval:.1f}% of one core at one sample per {interval} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--task", default="mini-tabular-accuracy")
    parser.add_argument("--public-mb", type=int, default=0, help="extra public data per task, in MB")
    parser.add_argument("--meter", action="store_true", help="time the watchdog's sample instead")
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args()
    if args.meter:
        meter_cost(args.procs, args.files)
        return
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
