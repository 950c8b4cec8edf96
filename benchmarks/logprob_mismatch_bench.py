"""Sampler against trainer on CPU, and what the per-token training record costs to store.

Runs `train run` (transformers backend, CPU) for `--rounds` rounds into a fresh warehouse, then
prints per round the `logprob_mismatch` figures (docs/metrics.md) beside NeMo RL's threshold
(mean multiplicative probability error < 1.1), and the storage of the per-token record against
the node payloads it sits beside: bytes per response token as `warehouse export` writes them
(Parquet) and as the arrays' raw width. Usage::

    python benchmarks/logprob_mismatch_bench.py --model tiny --rounds 2 --workdir /tmp/lmb \
        --tasks mini-tabular-accuracy,mini-regression-rmse --set siblings_per_expansion=8
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from _warehouse import fresh_warehouse  # benchmarks/_warehouse.py


def train(url: str, args) -> float:
    from click.testing import CliRunner

    from train.cli import main

    start = time.perf_counter()
    result = CliRunner().invoke(main, ["run", "--model", args.model, "--rounds", str(args.rounds), "--device", "cpu",
                                       "--backend", "hf", "--db", url, "--run-id", "bench", "--no-health-gate",
                                       "--checkpoint-dir", str(Path(args.workdir) / "ckpt"),
                                       *(["--tasks", args.tasks] if args.tasks else []),
                                       *[x for s in args.set for x in ("--set", s)]])
    if result.exit_code != 0:
        raise SystemExit(result.output)
    return time.perf_counter() - start


def mismatch(con) -> list[tuple]:
    return con.execute('SELECT "round", sum("trained_nodes"), sum("compared_tokens"), '
                       'sum("mult_prob_error" * "compared_tokens") / sum("compared_tokens"), '
                       'max("mult_prob_error_max"), max("mult_prob_error_p99"), '
                       'sum("share_abs_delta_gt_1" * "compared_tokens") / sum("compared_tokens"), '
                       'sum("kl_to_ref_mean" * "trained_tokens") / sum("trained_tokens") '
                       'FROM "logprob_mismatch" GROUP BY 1 ORDER BY 1').fetchall()


def storage(url: str, workdir: Path) -> dict:
    from warehouse.db import connect
    from warehouse.export import export_parquet

    out = workdir / "export"
    export_parquet(url, out, overwrite=True)
    size = {name: sum(p.stat().st_size for p in (out / name).rglob("*.parquet")) if (out / name).is_dir()
            else (out / f"{name}.parquet").stat().st_size for name in ("node_payloads", "node_train_tokens")}
    with connect(url, read_only=True) as con:
        tokens = con.execute('SELECT sum(len("response_token_ids")) FROM "node_payloads"').fetchone()[0]
        trained = con.execute('SELECT sum(len("trainer_logprobs")) FROM "node_train_tokens"').fetchone()[0]
    return {"tokens": tokens, "trained_tokens": trained,
            "payload_parquet_b_per_token": size["node_payloads"] / tokens,
            "train_parquet_b_per_token": size["node_train_tokens"] / trained,
            # raw widths: int32 id + float64 logprob per token; three float32 arrays per trained token
            "payload_arrays_b_per_token": 4 + 8, "train_arrays_b_per_token": 3 * 4}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tasks", help="comma-separated task slugs (default: the arm's)")
    parser.add_argument("--set", action="append", default=[], help="passed to train run as --set")
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    workdir = Path(args.workdir)
    url = fresh_warehouse(workdir)
    seconds = train(url, args)
    from warehouse.db import connect

    with connect(url, read_only=True) as con:
        rows = mismatch(con)
    print(f"train run --model {args.model} --rounds {args.rounds} (transformers, CPU): {seconds:.0f} s")
    print("round  nodes  compared  mult_prob_error  max  p99  share|d|>1  kl_to_ref  (NeMo RL: mean < 1.1)")
    for r in rows:
        print(f"{r[0]:>5}  {r[1]:>5}  {r[2]:>8}  {r[3]:.6f}  {r[4]:.4f}  {r[5]:.4f}  {r[6]:.4f}  {r[7]:.2e}")
    cost = storage(url, workdir)
    print(f"storage: {cost['tokens']} response tokens, {cost['trained_tokens']} trained; Parquet bytes/token: "
          f"node_payloads {cost['payload_parquet_b_per_token']:.1f}, node_train_tokens "
          f"{cost['train_parquet_b_per_token']:.1f}; raw array bytes/token: payload ids+logprobs "
          f"{cost['payload_arrays_b_per_token']}, training record {cost['train_arrays_b_per_token']}")


if __name__ == "__main__":
    main()
