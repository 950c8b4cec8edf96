"""What grading a node's submission costs: in the trainer's process, in the kept grader
process (`train.env.grading.grade_isolated`), and what a hostile header costs before parsing.

    python benchmarks/grading_bench.py [--repeat 10]

Workload: the bundled mini-tabular-accuracy task's sample submission, graded `--repeat` times
each way after one warm-up; then a 400 KB header of 100,000 identical column names (which
pandas took over a minute to read before the shape check) and one of a million names.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    from train.env import load_task
    from train.env.grading import grade_isolated, grade_submission

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    task = load_task("mini-tabular-accuracy")
    data = (task.public_dir / "sample_submission.csv").read_bytes()
    path = Path(tempfile.mkdtemp(prefix="grading-bench-")) / "submission.csv"
    path.write_bytes(data)
    grade_submission(task, path)
    start = time.perf_counter()
    for _ in range(args.repeat):
        grade_submission(task, path)
    here = (time.perf_counter() - start) / args.repeat
    start = time.perf_counter()
    grade_isolated(task, data)
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(args.repeat):
        grade_isolated(task, data)
    kept = (time.perf_counter() - start) / args.repeat
    print(f"in the trainer's process: {here * 1000:.1f} ms a grade")
    print(f"grader process: first grade {first * 1000:.0f} ms (start and imports), then {kept * 1000:.1f} ms a grade "
          f"({kept / here:.2f}x the trainer's own)")
    for label, header in (("100,000 identical columns", ",".join(["target"] * 100_000)),
                          ("1,000,000 columns", ",".join(f"c{i}" for i in range(1_000_000)))):
        path.write_text(f"id,{header}\n1,a\n")
        start = time.perf_counter()
        grade = grade_submission(task, path)
        print(f"{label} ({path.stat().st_size / 1e6:.1f} MB): {(time.perf_counter() - start) * 1000:.1f} ms, "
              f"{grade.status}: {grade.grade_error}")


if __name__ == "__main__":
    main()
