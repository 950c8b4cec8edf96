"""The published data roots' own model on one GPU: the 27B Qwen3.5 shape on random weights (issue 36).

Nothing is downloaded and no checkpoint is written: the model directory holds a config of the
shape (train.model_shapes: `qwen3_5_27b`, hybrid linear/full attention, vocab 248,320) and a
2,048-token tokenizer; the trainer draws its weights on the GPU (`--set
bench_random_weights=true`), vLLM starts on its dummy weights and gets the trainer's before
round 1. Two parts, each resumable across device calls (`--continue`), raw results written
under `--out` as they come:

- `update`: the GRPO step (`train.learn.learner.make_learner`, as `train run` makes it) at each of
  `--caps` (36,864 = hr24k_u6's total cap, 45,056 = hr32k's), `--steps` consecutive steps each,
  every step with one row at the cap (prompt = the arm's prompt cap, response = the rest) and a
  short sibling with another reward; each step's phases, its peak (`max_memory_allocated`) and
  train.fit's estimate of that peak, one JSON line per step (`update.jsonl`).
- `round`: `train run --arm hr24k_u6 --rounds 1 --backend vllm` on the shape with forced
  arm-mix lengths (`--set bench_lengths=arm`), the policy's base weights in host memory while
  the engine generates (`--set policy_offload=host`). It runs as a process of its own session
  (setsid), so it outlives a device call while the machine stays warm; this script polls its
  log until it ends or `--budget-s` passes, and `--continue` polls again. When it has ended, the
  round's phases are read back from the warehouse (`round.json`).

    PYTHONUNBUFFERED=1 PYTHONPATH=. python3 benchmarks/big_bench.py update --caps 45056,36864 --steps 3,5 \\
        --budget-s 420 --out $OUT
    PYTHONUNBUFFERED=1 PYTHONPATH=. python3 benchmarks/big_bench.py round --budget-s 540 --out $OUT
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

STATE = Path("/tmp/big_bench")
CAP_ARMS = {36864: "hr24k_u6", 45056: "hr32k"}


def model_dir(shape: str) -> Path:
    from train.model_shapes import write_model_dir

    return write_model_dir(shape, STATE / shape)


def copy_out(out: Path, *names: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        if (STATE / name).is_file():
            shutil.copy(STATE / name, out / name)


# --- update ------------------------------------------------------------------------------


def samples_at(cap: int, prompt_cap: int, step: int, vocab: int):
    """One row at the total cap and a short sibling (another reward: a nonzero advantage)."""
    import numpy as np

    from train.learn.step import Sample

    rng = np.random.default_rng(step)
    prompt = rng.integers(3, vocab, prompt_cap).tolist()
    long = rng.integers(3, vocab, cap - prompt_cap).tolist()
    short = rng.integers(3, vocab, 512).tolist()
    return [Sample(prompt, long, 1.0, "g"), Sample(prompt[:1024], short, 0.0, "g")]


def arm_at(cap: int):
    """The arm whose total cap is `cap`, or hr24k_u6 cut to it (prompt cap a third of it)."""
    from warehouse.arms import get_arm

    if cap in CAP_ARMS:
        return get_arm(CAP_ARMS[cap])
    base = get_arm("hr24k_u6")
    prompt = min(base.prompt_cap, cap // 3)
    return base.with_overrides(total_cap=cap, prompt_cap=prompt, response_cap=cap - prompt)


def run_update(args, out: Path) -> None:
    import torch

    from train.fit import GIB, Plan, estimate
    from train.learn.timing import PhaseTimer
    from train.learn.learner import make_learner
    from train.policy.loader import load_policy
    from train.settings import Knobs, RunOptions

    start = time.perf_counter()
    if args.fla_hopper_guard_off:
        # flash-linear-attention refuses its gated delta-rule backward on Hopper under Triton
        # 3.4-3.7.0 (wrong values, its issue #640); the machine has Triton 3.6. With the guard
        # off the step's memory and time are real, its gradient values are not: figures say so.
        import fla.ops.common.chunk_o as chunk_o

        chunk_o.TRITON_ABOVE_3_7_1 = True
    log_file = STATE / "update.jsonl"
    done = {}
    if args.cont and log_file.is_file():
        for line in log_file.read_text().splitlines():
            row = json.loads(line)
            if "step" in row:
                done[row["cap"]] = max(done.get(row["cap"], 0), row["step"])
    elif log_file.exists():
        log_file.unlink()
    directory = model_dir(args.shape)
    config = json.loads((directory / "config.json").read_text())
    caps = [int(c) for c in args.caps.split(",")]
    steps = [int(s) for s in args.steps.split(",")]
    arm = arm_at(caps[0])
    cuda = torch.cuda.is_available()
    policy = load_policy(directory, args.device, lora=(arm.lora_rank, arm.lora_alpha), random_weights=True)
    params = sum(p.numel() for p in policy.model.parameters() if not p.requires_grad)
    print(f"{args.shape}: {params / 1e9:.2f} B base parameters built on the GPU in {time.perf_counter() - start:.0f} s, "
          f"{torch.cuda.memory_allocated() / GIB if cuda else 0:.1f} GiB allocated", flush=True)
    total = torch.cuda.mem_get_info()[1] if cuda else 140 * GIB  # a CPU smoke run: an H200's
    vocab = config.get("text_config", config)["vocab_size"]
    with log_file.open("a") as fh:
        fh.write(json.dumps({"shape": args.shape, "base_params": params, "device": torch.cuda.get_device_name() if cuda else "cpu",
                             "device_gib": round(total / GIB, 1), "torch": torch.__version__,
                             "fla": _version("fla-core"), "transformers": _version("transformers")}) + "\n")
    for cap, count in zip(caps, steps):
        arm = arm_at(cap)
        learner = make_learner(policy, arm, {"learning_rate": 1e-5}, RunOptions(model=str(directory)), knobs=Knobs())
        est = estimate(config, Plan(total_cap=cap, rows=2, rank=arm.lora_rank, engine=False), total)
        step_est = next(p for p in est.phases if p.name == "step")
        last = 0.0
        for step in range(done.get(cap, 0) + 1, count + 1):
            elapsed = time.perf_counter() - start
            if elapsed + 1.2 * last > args.budget_s:
                print(f"budget: stopping before step {step} at cap {cap} ({elapsed:.0f} s); --continue resumes",
                      flush=True)
                copy_out(out, "update.jsonl")
                return
            timer = PhaseTimer()
            t0 = time.perf_counter()
            try:
                metrics = learner.step(samples_at(cap, arm.prompt_cap, step, vocab), timer, step)
                error = None
            except torch.OutOfMemoryError as err:  # recorded: the figure is whether it fits
                metrics, error = {}, f"OOM: {str(err).splitlines()[0]}"
            except Exception as err:  # noqa: BLE001 - recorded with its traceback; the next cap still runs
                import traceback

                traceback.print_exc()
                metrics, error = {}, f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:400]
            last = time.perf_counter() - t0
            if error and cuda:
                metrics["peak_mem_gib"] = round(torch.cuda.max_memory_allocated() / GIB, 2)  # up to the failure
            row = {"cap": cap, "fla_hopper_guard_off": args.fla_hopper_guard_off, "arm": arm.name, "step": step, "seconds": round(last, 2), "error": error,
                   "phases": timer.row(step),
                   "peak_gib": metrics.get("peak_mem_gib"), "estimate_gib": round(step_est.peak / GIB, 1),
                   "estimate_parts_gib": {k: round(v / GIB, 1) for k, v in step_est.parts.items()},
                   **{k: metrics.get(k) for k in ("tokens", "micro_batches", "largest_micro_batch", "loss", "grad_norm",
                                                  "update_variant", "update_free_gib", "update_peak_gib")}}
            print(json.dumps(row), flush=True)
            with log_file.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            copy_out(out, "update.jsonl")
            if error:
                torch.cuda.empty_cache()
                break
        del learner
    copy_out(out, "update.jsonl")


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# --- round -------------------------------------------------------------------------------


def round_command(args, directory: Path) -> list[str]:
    command = [sys.executable, "-m", "train.cli", "run", "--arm", args.arm, "--model", str(directory),
               "--rounds", "1", "--no-health-gate", "--device", "cuda", "--db", str(STATE / "w.duckdb"),
               "--checkpoint-dir", str(STATE / "ck"), "--run-id", args.run_id, "--backend", "vllm",
               "--unsafe-no-sandbox"]
    if args.tasks:
        command += ["--tasks", args.tasks]
    for pair in ("bench_lengths=" + args.mix, "bench_random_weights=true", "policy_offload=host",
                 f"gpu_memory_utilization={args.utilization}", *args.sets):
        command += ["--set", pair]
    return command


def run_round(args, out: Path) -> None:
    start = time.perf_counter()
    pid_file, log = STATE / "round.pid", STATE / "round.log"
    if not (args.cont and pid_file.is_file()):
        directory = model_dir(args.shape)
        subprocess.run([sys.executable, "-m", "warehouse.cli", "--db", str(STATE / "w.duckdb"), "init"], check=True)
        command = round_command(args, directory)
        (STATE / "round_command.json").write_text(json.dumps(command))
        print(" ".join(command), flush=True)
        with log.open("w") as fh:
            proc = subprocess.Popen(command, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
        pid_file.write_text(str(proc.pid))
    pid = int(pid_file.read_text())
    seen = 0
    while True:
        text = log.read_text(errors="replace") if log.is_file() else ""
        if len(text) > seen:
            print(text[seen:], end="", flush=True)
            seen = len(text)
        alive = _alive(pid)
        if not alive or time.perf_counter() - start > args.budget_s:
            break
        time.sleep(5)
    _gpu_line()
    copy_out(out, "round.log", "round_command.json")
    if alive:
        print(f"round still running after {time.perf_counter() - start:.0f} s: --continue polls again", flush=True)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from round_bench import read_back

    result = {"shape": args.shape, "arm": args.arm, "mix": args.mix, "run_id": args.run_id,
              "command": json.loads((STATE / "round_command.json").read_text())}
    try:
        result.update(read_back(STATE / "w.duckdb", args.run_id))
    except Exception as err:  # noqa: BLE001 - the log says what happened; keep what can be read
        result["read_back_error"] = f"{type(err).__name__}: {err}"
    (STATE / "round.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result.get("steps"), indent=1), flush=True)
    copy_out(out, "round.json")


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:  # not our child (an earlier call started it)
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.is_file() and "zombie" in status.read_text())


def _gpu_line() -> None:
    done = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.used,memory.total", "--format=csv,noheader"],
                          capture_output=True, text=True)
    print("nvidia-smi:", done.stdout.strip(), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["update", "round"])
    parser.add_argument("--shape", default="qwen3_5_27b")
    parser.add_argument("--device", default="cuda", help="update: cpu for a smoke run with a tiny shape")
    parser.add_argument("--caps", default="45056,36864")
    parser.add_argument("--steps", default="3,5")
    parser.add_argument("--arm", default="hr24k_u6")
    parser.add_argument("--mix", default="arm", choices=["arm", "cap"])
    parser.add_argument("--utilization", type=float, default=0.85)
    parser.add_argument("--run-id", default="big_bench_27b_round")
    parser.add_argument("--set", dest="sets", action="append", default=[], help="round: more train run --set pairs")
    parser.add_argument("--tasks", default="", help="round: train run --tasks (default: the arm's)")
    parser.add_argument("--budget-s", type=float, default=500)
    parser.add_argument("--fla-hopper-guard-off", action="store_true",
                        help="update: run fla's delta-rule backward on Hopper under Triton < 3.7.1 (memory and time "
                             "real, gradient values wrong: fla issue #640)")
    parser.add_argument("--continue", dest="cont", action="store_true")
    parser.add_argument("--out", default=str(STATE / "out"))
    args = parser.parse_args()
    STATE.mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    if args.part == "update":
        run_update(args, out)
    else:
        run_round(args, out)


if __name__ == "__main__":
    main()
