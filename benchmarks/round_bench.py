"""Whole `train run` rounds on one GPU at an arm's real caps, with a model of a real shape.

Builds a randomly initialised Qwen3-architecture model locally (nothing is downloaded): the
Qwen3-1.7B shape (28 layers, hidden 2048, 16/8 heads, head_dim 128, intermediate 6144) or the
Qwen3-8B shape (36 layers, hidden 4096, 32/8 heads, head_dim 128, intermediate 12288), with a
2,048-token byte-level BPE tokenizer from `train.policy.tokenizer.train_tokenizer`, saved
with `save_pretrained`. Then, as a user would:

    warehouse init --db DIR/w.duckdb
    train run --arm hr24k_u6 --model DIR/model --rounds 2 --no-health-gate --device cuda \\
        --db DIR/w.duckdb --checkpoint-dir DIR/ck --run-id round_bench_<size>

and reads back from the warehouse every phase of `steps` (gen, old_log_prob, ref, adv,
update_actor, update_weights, save_checkpoint, total seconds) and each round's generated
tokens (`nodes.n_response_tokens`), printing the round's tokens/s (generated tokens / gen_s).

    PYTHONPATH=. python3 benchmarks/round_bench.py --size 8b --rounds 2 --out round_8b.json

`--nproc 1,2` runs the same rounds once per rank count in the same call (`train run --nproc N`,
one GPU per rank, every rank generating its share of each call), then prints each count's
generation tokens/s over the first's and whether the rounds are identical node by node.

`--backend hf,vllm` runs the same rounds once per backend in the same call (`train run
--backend X`; `auto` by default, which is vLLM on a GPU where it is installed) and compares them
as it compares rank counts. Each round's line carries `generation_s` (the generation calls'
own seconds, from the task summaries) and `gen_phase_over_generation` (the gen phase, which
also executes every node, over generation alone: 1.0 when execution is hidden behind it).

`--continue` runs `--rounds` more rounds after the last run in `--dir` (`train run
--resume-from RUN:STEP` with the same checkpoint directory; the warehouse gets a new run row
that names the one it resumed): two rounds of the 8B at the arm's caps take longer than one
device call, so the first call runs `--rounds 1` and the next `--rounds 1 --continue`, with
`--dir` inside the repository and ignored by git (`.round_bench/`), which the device machine
keeps between calls while it stays warm.

A failed run (e.g. an OOM) prints the trainer's one `Error:` line and what it had written.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from warehouse.vocabulary import STEP_PHASE_COLUMNS

PHASES = (*STEP_PHASE_COLUMNS, "total_s")


def texts() -> list[str]:
    """Tokenizer training text: the bundled tasks' descriptions and solutions."""
    from train.env.tasks import BUNDLED_ROOT

    return [p.read_text(errors="replace") for p in sorted(BUNDLED_ROOT.rglob("*")) if p.is_file()
            and p.suffix in (".md", ".py", ".toml", ".txt")] * 4


def build(size: str, target: Path) -> Path:
    import torch
    from transformers import Qwen3ForCausalLM

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from generate_bench import qwen3_like
    from train.policy.tokenizer import train_tokenizer

    if (target / "config.json").is_file():
        return target
    tokenizer = train_tokenizer(texts(), vocab_size=2048)
    config = qwen3_like(size, vocab=len(tokenizer), positions=40960)
    config.bos_token_id, config.eos_token_id = tokenizer.bos_token_id, tokenizer.eos_token_id
    config.pad_token_id = tokenizer.pad_token_id
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        torch.set_default_dtype(torch.bfloat16 if device == "cuda" else torch.float32)
        model = Qwen3ForCausalLM(config)
        torch.set_default_dtype(torch.float32)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    del model
    return target


def read_back(db: Path, run_id: str) -> dict:
    from warehouse.db import connect

    with connect(f"duckdb:///{db}", read_only=True) as con:
        steps = con.execute(f"SELECT step, {', '.join(PHASES)} FROM steps WHERE run_id = ? ORDER BY step",
                            [run_id]).fetchall()
        tokens = dict(con.execute("SELECT round, sum(n_response_tokens) FROM nodes WHERE run_id = ? GROUP BY round",
                                  [run_id]).fetchall())
        # the generation calls' own seconds (task_round summaries share each call's time by tokens)
        llm = dict(con.execute('SELECT "round", sum("gen_llm_seconds") FROM "task_rounds" WHERE "run_id" = ? '
                               'GROUP BY "round"', [run_id]).fetchall())
        backend = con.execute("SELECT json_extract_string(overrides, '$.backend'), "
                              "json_extract_string(overrides, '$.backend_version') FROM runs WHERE run_id = ?",
                              [run_id]).fetchone()
    rounds = []
    for row in steps:
        entry = {"step": row[0], **{name: (round(v, 2) if v is not None else None) for name, v in zip(PHASES, row[1:])}}
        entry["tokens"] = int(tokens.get(row[0], 0))
        entry["gen_tokens_per_s"] = round(entry["tokens"] / entry["gen_s"], 1) if entry["gen_s"] else None
        generating = llm.get(row[0])
        entry["generation_s"] = round(generating, 2) if generating else None
        # the gen phase (generation + execution of every node) over generation alone: 1.0 when the
        # execution is hidden behind generation
        entry["gen_phase_over_generation"] = round(entry["gen_s"] / generating, 3) if generating and entry["gen_s"] else None
        rounds.append(entry)
    return {"steps": rounds, "rounds_written": sorted(tokens), "backend": backend and backend[0],
            "backend_version": backend and backend[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1.7b", choices=["1.7b", "8b", "tiny"], help="tiny: a CPU smoke run")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--arm", default="hr24k_u6")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default="/tmp/round_bench", help="model, warehouse and checkpoints go here")
    parser.add_argument("--set", dest="sets", action="append", default=[], help="passed to train run --set")
    parser.add_argument("--nproc", default="1", help="rank counts to run in turn, e.g. 1,2")
    parser.add_argument("--backend", default="auto",
                        help="generation backends to run in turn (train run --backend), e.g. hf,vllm: each a run of "
                             "its own in the same call, so their figures stand side by side")
    parser.add_argument("--continue", dest="cont", action="store_true",
                        help="resume after the last run in --dir (its checkpoint) for --rounds more rounds")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    root = Path(args.dir) / args.size
    root.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    model = build(args.size, root / "model")
    print(f"model {model} ready in {time.perf_counter() - start:.0f} s", flush=True)
    db, stem = root / "w.duckdb", f"round_bench_{args.size.replace('.', 'p')}_{int(time.time())}"
    subprocess.run([sys.executable, "-m", "warehouse.cli", "--db", str(db), "init"], check=True)
    resume = None
    if args.cont:
        last = root / "last_run.json"
        if not last.is_file():
            sys.exit(f"--continue: no earlier run in {root} ({last} is missing); run once without it first")
        resume = json.loads(last.read_text())
        print(f"continuing {resume['run_id']} after round {resume['last_round']}", flush=True)
    results = [run_once(args, model, root, db, f"{stem}_{backend}_np{n}", n, resume, backend)
               for backend in args.backend.split(",") for n in map(int, args.nproc.split(","))]
    if len(results) > 1:
        compare(db, results)
    if args.out:
        Path(args.out).write_text(json.dumps(results[0] if len(results) == 1 else results, indent=1))


def run_once(args, model: Path, root: Path, db: Path, run_id: str, nproc: int, resume: dict | None = None,
             backend: str = "auto") -> dict:
    command = [sys.executable, "-m", "train.cli", "run", "--arm", args.arm, "--model", str(model),
               "--rounds", str(args.rounds), "--no-health-gate", "--device", args.device, "--db", str(db),
               "--checkpoint-dir", str(root / "ck"), "--run-id", run_id, "--backend", backend]
    if resume is not None:
        command += ["--resume-from", f"{resume['run_id']}:{resume['last_round']}"]
    if nproc > 1:  # 1: the plain one-process run, the baseline
        command += ["--nproc", str(nproc)]
    for pair in args.sets:
        command += ["--set", pair]
    print(" ".join(command), flush=True)
    done = subprocess.run(command)
    result = {"size": args.size, "arm": args.arm, "nproc": nproc, "requested_backend": backend, "run_id": run_id,
              "command": command,
              "exit_code": done.returncode, **read_back(db, run_id)}
    for step in result["steps"]:
        print(json.dumps(step), flush=True)
    if result["rounds_written"] and nproc == 1 and backend == args.backend.split(",")[0]:  # what --continue resumes from
        (root / "last_run.json").write_text(json.dumps({"run_id": run_id, "last_round": max(result["rounds_written"])}))
    return result


NODES_SQL = """SELECT n."round", n."task", n."node_id", n."status", md5(coalesce(p."code", '')),
       p."response_token_ids"
FROM "nodes" n JOIN "node_payloads" p USING ("source_id", "line_no")
WHERE n."run_id" = ?
ORDER BY 1, 2, n."step", n."line_no"
"""


def compare(db: Path, results: list[dict]) -> None:
    """Each run against the first (another rank count or backend): generation tokens/s ratio per
    round, step time, and node identity."""
    from warehouse.db import connect

    base = results[0]
    with connect(f"duckdb:///{db}", read_only=True) as con:
        nodes = {r["run_id"]: con.execute(NODES_SQL, [r["run_id"]]).fetchall() for r in results}
    for other in results[1:]:
        for a, b in zip(other["steps"], base["steps"]):
            rates = a["gen_tokens_per_s"], b["gen_tokens_per_s"]
            rate = rates[0] / rates[1] if all(rates) else None
            same = [x for x in nodes[other["run_id"]] if x[0] == a["step"]] == \
                [x for x in nodes[base["run_id"]] if x[0] == a["step"]]
            print(f"round {a['step']}: {other['backend']} x{other['nproc']} ranks / {base['backend']} x{base['nproc']}: "
                  f"gen tokens/s "
                  f"{a['gen_tokens_per_s']} / {b['gen_tokens_per_s']} = {rate and round(rate, 2)}x; step "
                  f"{a['total_s']} / {b['total_s']} s; update_actor {a['update_actor_s']} / {b['update_actor_s']} s; "
                  f"identical node by node: {'yes' if same else 'no'}", flush=True)


if __name__ == "__main__":
    main()
