"""GPU nodes on a GPU machine: the three checks of issue 14, item 6, in one command.

1. a node that declares ``gpu = 1`` and trains a small CNN on its GPU ends ``ok`` with
   ``gpu_util`` above 0;
2. a node that declares ``gpu = 1`` and sleeps is killed as ``GpuIdleError`` (reward -0.2);
3. a round of ``--nodes`` such nodes, each holding ``--hold`` of its GPU's memory (so two on
   one GPU could not fit), shares the execution GPUs with no out-of-memory error: at most one
   node per GPU at a time, the others wait (their wait is ``exec_timings.pending``).

Every node goes through the real path (extraction, sandbox, NVML sampling, grading) on the
bundled task mini-tabular-accuracy; each writes the sample submission so that it can be ok.
Needs torch with CUDA and ``nvidia-ml-py``. Prints PASS/FAIL per check, writes every node
record's GPU fields to ``--out`` and exits 1 when a check fails:

    PYTHONPATH=. python benchmarks/gpu_nodes.py --out $OUT/gpu_nodes.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict

from warehouse.vocabulary import OK

HEADER = "# /// script\n# [tool.resources]\n# gpu = 1\n# ///\n"
CNN = HEADER + '''import os, shutil, time
import torch
import torch.nn.functional as F

print("node", os.environ["CUDA_VISIBLE_DEVICES"], "start", time.time(), flush=True)
dev = torch.device("cuda")
hold = int(HOLD_FRACTION * torch.cuda.get_device_properties(0).total_memory)
block = torch.empty(hold, dtype=torch.uint8, device=dev) if hold else None
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(64, 64, 3, padding=1),
    torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(512, 3, 64, 64, device=dev), torch.randint(0, 10, (512,), device=dev)
steps, end = 0, time.time() + SECONDS
while time.time() < end:
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    steps += 1
torch.cuda.synchronize()
print("steps", steps, "loss", float(loss), flush=True)
shutil.copy("input/sample_submission.csv", "submission/submission.csv")
print("node", os.environ["CUDA_VISIBLE_DEVICES"], "end", time.time(), flush=True)
'''
SLEEPER = HEADER + "import time\ntime.sleep(600)\n"


def fenced(code: str) -> str:
    return f"Plan.\n```python\n{code}```\n"


def cnn(seconds: float, hold: float) -> str:
    return fenced(CNN.replace("SECONDS", str(seconds)).replace("HOLD_FRACTION", str(hold)))


def check(name: str, ok: bool, detail: str, results: dict) -> None:
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)
    results["checks"][name] = {"pass": ok, "detail": detail}


def gpu_fields(record: dict) -> dict:
    keys = ("status", "exc_type", "reward", "gpu_util", "gpu_util_peak", "gpu_mem_used_gi", "gpu_name",
            "exec_time", "exec_timings", "resources")
    return {k: record.get(k) for k in keys}


def per_gpu_overlap(records: list[dict]) -> int:
    """The most nodes that ran at once on one GPU, from the start/end lines they printed."""
    spans = defaultdict(list)
    for r in records:
        marks = {}
        for line in (r["term_tail"] or "").splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[0] == "node":
                marks[parts[2]] = (parts[1], float(parts[3]))
        if "start" in marks and "end" in marks:
            spans[marks["start"][0]].append((marks["start"][1], marks["end"][1]))
    most = 0
    for intervals in spans.values():
        events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
        level = 0
        for _, delta in events:
            level += delta
            most = max(most, level)
    return most


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu_nodes.json")
    parser.add_argument("--gpus", default="all", help="execution GPUs: all, or indices such as 0,1")
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--hold", type=float, default=0.6, help="share of GPU memory each round node holds")
    parser.add_argument("--idle-window", type=float, default=20.0)
    args = parser.parse_args()

    from train.env import Limits, LocalExecutor, capabilities, evaluate, load_task
    from train.env.gpu import device_count, parse_exec_gpus

    gpus = list(range(device_count())) if args.gpus == "all" else parse_exec_gpus(args.gpus)
    if not gpus:
        print("FAIL  no GPU visible through NVML (is nvidia-ml-py installed?)")
        return 1
    caps = capabilities()
    results = {"gpus": gpus, "sandbox": {"allow_list": caps.bwrap, "warnings": list(caps.warnings)}, "checks": {}}
    print(f"execution GPUs {gpus}; allow-list sandbox: {caps.bwrap}", flush=True)
    task = load_task("mini-tabular-accuracy")
    limits = Limits(timeout_s=300, idle_window_s=args.idle_window, mem_gi=32, cpus=2)

    start = time.time()
    record = evaluate(task, [cnn(20, 0.0)], LocalExecutor(gpus=gpus[:1]), limits)[0]
    results["cnn"] = gpu_fields(record)
    check("cnn_node_ok_with_gpu_util", record["status"] == OK and (record["gpu_util"] or 0) > 0,
          f"status {record['status']} exc {record['exc_type']} gpu_util {record['gpu_util']} peak "
          f"{record['gpu_util_peak']} mem {record['gpu_mem_used_gi']} GiB on {record['gpu_name']} "
          f"({time.time() - start:.0f} s)" + ("" if record["status"] == OK else f"\n{record['term_tail'][-1500:]}"),
          results)

    start = time.time()
    record = evaluate(task, [fenced(SLEEPER)], LocalExecutor(gpus=gpus[:1]), limits)[0]
    results["sleeper"] = gpu_fields(record)
    check("sleeping_gpu_node_is_gpu_idle", (record["exc_type"], record["reward"]) == ("GpuIdleError", -0.2),
          f"status {record['status']} exc {record['exc_type']} reward {record['reward']} after "
          f"{record['exec_time']} s (window {args.idle_window} s)", results)

    start = time.time()
    records = evaluate(task, [cnn(3, args.hold)] * args.nodes, LocalExecutor(gpus=gpus), limits)
    wall = time.time() - start
    statuses = defaultdict(int)
    for r in records:
        statuses[r["status"]] += 1
    ooms = sum("out of memory" in (r["term_tail"] or "").lower() for r in records)
    pending = [r["exec_timings"]["pending"] for r in records if r.get("exec_timings")]
    overlap = per_gpu_overlap(records)
    results["round"] = {"nodes": args.nodes, "wall_s": round(wall, 1), "statuses": dict(statuses), "oom": ooms,
                        "most_nodes_at_once_on_one_gpu": overlap,
                        "pending_median_s": round(statistics.median(pending), 2) if pending else None,
                        "pending_max_s": round(max(pending), 2) if pending else None,
                        "records": [gpu_fields(r) for r in records]}
    check("round_shares_gpus_without_oom",
          statuses.get(OK, 0) == args.nodes and ooms == 0 and overlap == 1,
          f"{args.nodes} nodes on {len(gpus)} GPU(s) in {wall:.0f} s: {dict(statuses)}, {ooms} OOM, at most "
          f"{overlap} node(s) at once per GPU, pending median {results['round']['pending_median_s']} s "
          f"max {results['round']['pending_max_s']} s", results)
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=2, default=str)
    print(f"wrote {args.out}")
    return 0 if all(c["pass"] for c in results["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
