"""Compare the 2-rank and 1-process runs of benchmarks/multi_gpu_run.sh, from the warehouse.

    python benchmarks/multi_gpu_compare.py WAREHOUSE.duckdb [--rounds R]

Round 1 is sampled before any update, so it must match node by node; step 1 is the same
update computed by one process or split over two ranks (equal up to float summation order);
later rounds may drift apart (bf16 sampling on different weights' rounding). The update's
seconds per step are compared as a ratio, 2 ranks over 1 process (the baseline)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from warehouse.vocabulary import OK

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NODES_SQL = """SELECT n."task", n."node_id", n."status", n."reward", md5(coalesce(p."code", ''))
FROM "nodes" n JOIN "node_payloads" p USING ("source_id", "line_no")
WHERE n."run_id" = ? AND n."round" = ? ORDER BY 1, 2"""
METRICS = ("loss", "kl", "grad_norm", "entropy", "tokens", "micro_batches", "peak_mem_gib")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    from warehouse.db import connect

    with connect(f"duckdb:///{args.db}", read_only=True) as con:
        for r in range(1, args.rounds + 1):
            a, b = (con.execute(NODES_SQL, [run, r]).fetchall() for run in ("nproc2", "nproc1"))
            valid = [sum(row[2] == OK for row in rows) for rows in (a, b)]
            print(f"round {r}: {len(a)} / {len(b)} nodes, valid {valid[0]} / {valid[1]} (2 ranks / 1 process), "
                  f"identical node by node: {'yes' if a == b else 'no'}")
        cols = ", ".join(f'"{m}"' for m in METRICS)
        for run in ("nproc2", "nproc1", "nproc2_resumed"):
            for row in con.execute(f'SELECT "step", {cols} FROM "step_metrics" WHERE "run_id" = ? ORDER BY 1',
                                   [run]).fetchall():
                print(f"{run:15s} step {row[0]}: " + ", ".join(f"{m} {v:.6g}" if isinstance(v, float) else f"{m} {v}"
                                                               for m, v in zip(METRICS, row[1:])))
        times = {run: con.execute('SELECT avg("update_actor_s"), avg("old_log_prob_s" + "ref_s"), '
                                  'avg("update_weights_s"), avg("gen_s") FROM "steps" WHERE "run_id" = ? AND "step" > 1',
                                  [run]).fetchone() for run in ("nproc2", "nproc1")}
        for run, (upd, lp, uw, gen) in times.items():
            if upd is None:
                print(f"{run}: no step after the first")
                continue
            print(f"{run}: update_actor {upd:.3f} s, old_log_prob+ref {lp:.3f} s, update_weights {uw:.3f} s, "
                  f"gen {gen:.1f} s per step (steps 2..)")
        if times["nproc1"][0] and times["nproc2"][0]:
            print(f"update_actor, 2 ranks / 1 process: {times['nproc2'][0] / times['nproc1'][0]:.2f}x the seconds")
        resumed = con.execute('SELECT "resumed_from_run", "resumed_from_step" FROM "runs" WHERE "run_id" = ?',
                              ["nproc2_resumed"]).fetchone()
        print(f"nproc2_resumed: resumed_from {resumed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
