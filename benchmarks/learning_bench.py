"""Learning benchmark: does `train run` raise the bundled tasks' valid rate over no learning?

    python benchmarks/learning_bench.py [--seeds 0,1,2] [--rounds 5] [--workers K]
        [--set learning_rate=1e-2 ...] [--out benchmarks/results/learning_<tag>.json]

For each seed, two runs of `train run --arm hr24k_u6 --model tiny --device cpu` on the bundled
mini tasks, each into its own fresh warehouse, each its own process:

* learn:    the GRPO step after every round (the loop as shipped, `--set` overrides applied);
* no-learn: the baseline, `--no-learn`, same seed and the same overrides.

Round 1 is sampled before any step, so it must be identical in both runs: the benchmark checks
that node by node (id, status, reward, code) and prints it. Round 2 expands the same parents
with the same draws, so from round 2 on the only difference is the weights.

Every figure is read back FROM THE WAREHOUSE, not from the runs' output: the valid rate of a
round is sum(valid) / sum(nodes) of the `task_round_metrics` view (docs/metrics.md: valid = status
'ok'), the step's kl / entropy / loss / grad norm come from `step_metrics`, and the distinct
drafts (scripts) per round from `node_payloads`. Printed: valid rate per round, learn against
no-learn, mean and spread (sample standard deviation) over seeds; the gain (learn - no-learn)
and ratio (learn / no-learn) for rounds 2..R, per round and pooled.

`--workers K` runs K of the (seed, arm) runs at a time; each gets cores // K execution workers
and torch threads (`--cores`, default the machine's), so K x workers fits the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from warehouse.vocabulary import MODES

ARMS = ("learn", "no_learn")
BIN = Path(sys.executable).parent


@dataclass
class RunSpec:
    """One `train run` of the benchmark: a seed, learning or not, its own warehouse."""

    seed: int
    arm: str  # learn | no_learn
    db: Path
    log: Path
    command: list = field(default_factory=list)
    threads: int = 1

    @property
    def run_id(self) -> str:
        return f"bench_s{self.seed}_{self.arm}"


# --- running ---------------------------------------------------------------------------------

def train_command(spec: RunSpec, args) -> list[str]:
    """The exact `train run` command line for one run."""
    cmd = [str(BIN / "train"), "run", "--arm", args.arm, "--model", args.model, "--device", "cpu",
           "--rounds", str(args.rounds), "--seed", str(spec.seed), "--db", str(spec.db),
           "--run-id", spec.run_id, "--exec-workers", str(spec.threads),
           "--learn" if spec.arm == "learn" else "--no-learn"]
    for pair in args.sets:
        cmd += ["--set", pair]
    return cmd


def plan_runs(args, work: Path) -> list[RunSpec]:
    """Every (seed, arm) run with its fresh warehouse; K parallel runs share the cores."""
    from warehouse.migrate import init_db

    threads = max(1, args.cores // args.workers)
    specs = []
    for seed in args.seeds:
        for arm in ARMS:
            spec = RunSpec(seed, arm, work / f"s{seed}_{arm}.duckdb", work / f"s{seed}_{arm}.log",
                           threads=threads)
            spec.db.unlink(missing_ok=True)
            init_db(f"duckdb:///{spec.db}")
            spec.command = train_command(spec, args)
            specs.append(spec)
    return specs


def execute(spec: RunSpec) -> dict:
    """Run one `train run` to the end; its output goes to spec.log."""
    env = {**os.environ, "OMP_NUM_THREADS": str(spec.threads), "MKL_NUM_THREADS": str(spec.threads)}
    started = time.perf_counter()
    with open(spec.log, "w") as log:
        rc = subprocess.run(spec.command, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    seconds = time.perf_counter() - started
    print(f"  seed {spec.seed} {spec.arm:8s} done in {seconds:.0f} s (exit {rc})", flush=True)
    return {"rc": rc, "wall_s": seconds}


def ensure_policy(model: str) -> None:
    """Build the tiny policy once, before K runs would each start building it."""
    if model == "tiny":
        subprocess.run([str(BIN / "train"), "tiny-policy"], check=True, stdout=subprocess.DEVNULL)


# --- reading the warehouse back --------------------------------------------------------------

ROUNDS_SQL = """
SELECT "round", sum("nodes") AS "nodes", sum("valid") AS "valid",
       sum("valid") / NULLIF(sum("nodes"), 0) AS "valid_rate",
       sum("reward_node_mean" * "nodes") / NULLIF(sum("nodes"), 0) AS "reward_mean"
FROM "task_round_metrics" WHERE "run_id" = ? GROUP BY "round" ORDER BY "round"
"""
DRAFTS_SQL = """
SELECT n."round", count(DISTINCT p."code") AS "distinct_scripts"
FROM "nodes" AS n JOIN "node_payloads" AS p USING ("source_id", "line_no")
WHERE n."run_id" = ? GROUP BY n."round"
"""
MODES_SQL = """
SELECT "round", "mode", count(*) AS "nodes", count(*) FILTER (WHERE "status" = 'ok') AS "valid"
FROM "nodes" WHERE "run_id" = ? GROUP BY "round", "mode"
"""
HABIT_SQL = """
SELECT "round", count(*) FILTER (WHERE "exc_type" = 'FileNotFoundError') AS "habit_nodes"
FROM "nodes" WHERE "run_id" = ? GROUP BY "round"
"""
STEPS_SQL = """
SELECT "step", "loss", "kl", "entropy", "grad_norm", "clip_frac", "lr"
FROM "step_metrics" WHERE "run_id" = ? ORDER BY "step"
"""
ROUND1_SQL = """
SELECT n."task", n."node_id", n."status", n."reward", md5(coalesce(p."code", ''))
FROM "nodes" AS n JOIN "node_payloads" AS p USING ("source_id", "line_no")
WHERE n."run_id" = ? AND n."round" = 1 ORDER BY 1, 2
"""


def _rows(con, sql: str, run_id: str) -> list[dict]:
    cur = con.execute(sql, [run_id])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def read_run(db: Path, run_id: str) -> dict:
    """Per-round valid rate, distinct scripts and the step metrics, from the run's warehouse."""
    from warehouse.db import connect

    with connect(f"duckdb:///{db}", read_only=True) as con:
        rounds = _rows(con, ROUNDS_SQL, run_id)
        scripts = {r["round"]: r["distinct_scripts"] for r in _rows(con, DRAFTS_SQL, run_id)}
        modes = {(r["round"], r["mode"]): r for r in _rows(con, MODES_SQL, run_id)}
        habit = {r["round"]: r["habit_nodes"] for r in _rows(con, HABIT_SQL, run_id)}
        steps = _rows(con, STEPS_SQL, run_id)
        round1 = [list(r.values()) for r in _rows(con, ROUND1_SQL, run_id)]
    for row in rounds:
        row["distinct_scripts"] = scripts.get(row["round"], 0)
        row["habit_nodes"] = habit.get(row["round"], 0)  # read Kaggle's paths (train.tiny.corpus)
        for mode in MODES:  # drafts: the one mode whose prompts do not depend on earlier rounds
            counts = modes.get((row["round"], mode), {})
            row[f"{mode}_nodes"], row[f"{mode}_valid"] = counts.get("nodes", 0), counts.get("valid", 0)
    return {"rounds": rounds, "steps": steps, "round1": round1}


# --- summarising ----------------------------------------------------------------------------

def _spread(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values) if values else None,
            "sd": statistics.stdev(values) if len(values) > 1 else 0.0, "n": len(values)}


def rate_table(runs: dict, seeds: list[int], rounds: int, prefix: str = "", count: str = "valid") -> dict:
    """{arm: {round: [count / nodes per seed]}}; seeds whose run has no such node in a round are
    left out of it. prefix 'draft_': the drafts alone; count 'habit_nodes': the share of nodes
    that crashed on a Kaggle path instead of the valid rate."""
    table = {arm: {r: [] for r in range(1, rounds + 1)} for arm in ARMS}
    for seed in seeds:
        for arm in ARMS:
            for row in runs.get((seed, arm), {}).get("rounds", []):
                if row[f"{prefix}nodes"] and row["round"] in table[arm]:
                    table[arm][row["round"]].append(row[f"{prefix}{count}"] / row[f"{prefix}nodes"])
    return table


def paired_gains(runs: dict, seeds: list[int], first: int, last: int, prefix: str = "") -> list[dict]:
    """Per seed: pooled valid rate over rounds first..last (valid / nodes), learn and no-learn;
    prefix 'draft_' counts the drafts alone."""
    out = []
    for seed in seeds:
        pooled = {}
        for arm in ARMS:
            rows = [r for r in runs.get((seed, arm), {}).get("rounds", []) if first <= r["round"] <= last]
            nodes = sum(r[f"{prefix}nodes"] for r in rows)
            pooled[arm] = sum(r[f"{prefix}valid"] for r in rows) / nodes if nodes else None
        if None not in pooled.values():
            out.append({"seed": seed, **pooled, "gain": pooled["learn"] - pooled["no_learn"]})
    return out


def summarise(runs: dict, seeds: list[int], rounds: int) -> dict:
    table, drafts = rate_table(runs, seeds, rounds), rate_table(runs, seeds, rounds, "draft_")
    habit = rate_table(runs, seeds, rounds, count="habit_nodes")
    per_round = []
    for r in range(1, rounds + 1):
        learn, base = _spread(table["learn"][r]), _spread(table["no_learn"][r])
        ratio = learn["mean"] / base["mean"] if learn["mean"] is not None and base["mean"] else None
        gain = learn["mean"] - base["mean"] if None not in (learn["mean"], base["mean"]) else None
        per_round.append({"round": r, "learn": learn, "no_learn": base, "gain": gain, "ratio": ratio,
                          "draft_learn": _spread(drafts["learn"][r]), "draft_no_learn": _spread(drafts["no_learn"][r]),
                          "habit_learn": _spread(habit["learn"][r]), "habit_no_learn": _spread(habit["no_learn"][r])})
    identical = {seed: runs[(seed, "learn")]["round1"] == runs[(seed, "no_learn")]["round1"]
                 for seed in seeds if (seed, "learn") in runs and (seed, "no_learn") in runs}
    return {"per_round": per_round, "rounds_2_to_R": _pooled(paired_gains(runs, seeds, 2, rounds)),
            "drafts_rounds_2_to_R": _pooled(paired_gains(runs, seeds, 2, rounds, "draft_")),
            "round1_identical": identical}


def _pooled(pairs: list[dict]) -> dict:
    pooled = {"pairs": pairs, "gain": _spread([p["gain"] for p in pairs]),
              "learn": _spread([p["learn"] for p in pairs]), "no_learn": _spread([p["no_learn"] for p in pairs]),
              "seeds_learn_ahead": sum(p["gain"] > 0 for p in pairs)}
    if pooled["no_learn"]["mean"]:
        pooled["ratio"] = pooled["learn"]["mean"] / pooled["no_learn"]["mean"]
    return pooled


# --- output ---------------------------------------------------------------------------------

def _fmt(s: dict) -> str:
    return "   -   " if s["mean"] is None else f"{s['mean']:.3f}+-{s['sd']:.3f}"


def render(result: dict) -> str:
    summary, lines = result["summary"], []
    for seed, same in summary["round1_identical"].items():
        lines.append(f"seed {seed}: round 1 identical in both runs (node ids, status, reward, code): "
                     f"{'yes' if same else 'NO'}")
    lines.append("valid rate per round, mean+-sd over seeds (drafts: the drafts' own valid rate)")
    lines.append("round  learn            no-learn          gain    ratio   drafts: learn    no-learn"
                 "          FileNotFoundError share: learn  no-learn")
    for row in summary["per_round"]:
        gain = "   -  " if row["gain"] is None else f"{row['gain']:+.3f}"
        ratio = "  -  " if row["ratio"] is None else f"{row['ratio']:.3f}"
        lines.append(f"{row['round']:5d}  {_fmt(row['learn']):15s}  {_fmt(row['no_learn']):15s}  {gain}  {ratio}   "
                     f"{_fmt(row['draft_learn']):15s}  {_fmt(row['draft_no_learn']):15s}  "
                     f"{_fmt(row['habit_learn']):15s}  {_fmt(row['habit_no_learn'])}")
    for key, what in (("rounds_2_to_R", "all nodes"), ("drafts_rounds_2_to_R", "drafts only")):
        pooled = summary[key]
        if pooled["pairs"]:
            lines.append(f"rounds 2..{result['options']['rounds']} pooled, {what}: learn {_fmt(pooled['learn'])}, "
                         f"no-learn {_fmt(pooled['no_learn'])}, gain {_fmt(pooled['gain'])}, "
                         f"ratio {pooled.get('ratio', float('nan')):.3f}; learn ahead on "
                         f"{pooled['seeds_learn_ahead']} of {len(pooled['pairs'])} seeds")
    lines += _step_lines(result["runs"])
    return "\n".join(lines)


def _step_lines(runs: list[dict]) -> list[str]:
    lines = []
    for run in runs:
        if run["arm"] != "learn" or not run.get("steps"):
            continue
        kl = ", ".join(f"{s['kl']:.2g}" for s in run["steps"] if s["kl"] is not None)
        ent = ", ".join(f"{s['entropy']:.3f}" for s in run["steps"] if s["entropy"] is not None)
        scripts = ", ".join(str(r["distinct_scripts"]) for r in run["rounds"])
        lines.append(f"seed {run['seed']} learn: kl per step {kl}; entropy {ent}; distinct scripts per round "
                     f"{scripts}; {run['wall_s']:.0f} s")
    return lines


# --- the run --------------------------------------------------------------------------------

def measure(args, work: Path) -> dict:
    ensure_policy(args.model)
    specs = plan_runs(args, work)
    print(f"{len(specs)} runs, {args.workers} at a time, {specs[0].threads} exec workers / torch threads each",
          flush=True)
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        outcomes = list(pool.map(execute, specs))
    runs, records = {}, []
    for spec, outcome in zip(specs, outcomes):
        record = {"seed": spec.seed, "arm": spec.arm, "run_id": spec.run_id,
                  "command": f"OMP_NUM_THREADS={spec.threads} MKL_NUM_THREADS={spec.threads} "
                             + shlex.join(spec.command), **outcome}
        if outcome["rc"] != 0:
            record["log_tail"] = spec.log.read_text()[-2000:]
            last = (record["log_tail"].strip().splitlines() or ["(no output)"])[-1]
            print(f"  seed {spec.seed} {spec.arm} FAILED (exit {outcome['rc']}), left out: {last}")
        else:
            runs[(spec.seed, spec.arm)] = read_run(spec.db, spec.run_id)
            record.update({k: v for k, v in runs[(spec.seed, spec.arm)].items() if k != "round1"})
        records.append(record)
    return {"runs": records, "summary": summarise(runs, args.seeds, args.rounds)}


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",") if x.strip()], default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1, help="(seed, arm) runs at a time.")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                        help="Cores to share among the parallel runs (default: all).")
    parser.add_argument("--arm", default="hr24k_u6")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="Passed to both runs as `train run --set` (e.g. learning_rate=1e-2).")
    parser.add_argument("--work", type=Path, default=None,
                        help="Where warehouses and logs go (default: a temp dir, removed).")
    parser.add_argument("--out", type=Path, default=None, help="Write the figures as JSON here.")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="learning-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        result = measure(args, work)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    command = shlex.join([Path(sys.argv[0]).as_posix(), *(sys.argv[1:] if argv is None else argv)])
    result.update({"command": f"python {command}", "wall_s": time.perf_counter() - started,
                   "pythonpath": os.environ.get("PYTHONPATH"),  # set when measuring a snapshot of the code
                   "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}})
    result["summary"]["round1_identical"] = {str(k): v for k, v in result["summary"]["round1_identical"].items()}
    print(render(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2, default=str))
        print(f"figures written to {args.out}")
    return 0 if all(r["rc"] == 0 for r in result["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
