"""The sample's reward-model run: data root 004's run, in the layout of docs/reward_model.md.

Every figure data root 004 publishes is in these files: the exploration units U-01 to U-05 (proxy
scores with their standard errors, seconds, peak memory, the killed third member, the
host-memory OOM), the formal replay's budget facts (42,600 s wall clock, 600 s reserve,
40,688.220 s of training, 40,737.569 s in all, 32 members x 96 steps = 3,072), its 32
published and 3 retained snapshots, the final scores at 2880 / 2976 / 3072, the proxy-rows
diagnostic 34.9698 and the shipped reference 74.568936. Values the seed does not give are
filled in so the rows stay consistent, never so a figure changes:

* standard errors of the U-02/U-03 proxy scores: 1.03x the binomial SE of their n (the seed
  says "about 2.1 points");
* section scores: the seed gives Chat Hard 63.51 -> 54.56 for U-05; the others are chosen so
  the four sections average to the score (RewardBench v1's aggregation), with the section
  sizes of RewardBench (358 + 456 + 740 + 1431 = 2985) and a proportional 512-row proxy;
* the artifact size: 7,110,664,192 parameters (Mistral-7B without its LM head, plus a 4096-wide
  scalar head: the seed's "7.11 billion");
* the smoke run's four steps (28.05 s each, 112.2 s in all; peak 18.24 GiB = 19.58 GB).

`plant_rm_faults(run_dir)` plants the four bad inputs the gate must catch (tests only: the
sample stays clean so `warehouse demo` passes `warehouse check`).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from ingest.rm_layout import (ARTIFACTS, JOBS, MANIFEST, OUTCOME, STEPS, receipt_path,
                              write_evaluation_files, write_json, write_jsonl)

RM_RUN = "claude__ultrafeedback_bt_rm_rewardbench__claude-sonnet-5__xhigh"
TASK = "ultrafeedback_bt_rm_rewardbench"
PROXY, FINAL = "rewardbench_proxy_512", "rewardbench_v1_score"
PROXY_N, FULL_N = 512, 2985
SECTIONS = ("Chat", "Chat Hard", "Safety", "Reasoning")
SECTION_N = {"full": (358, 456, 740, 1431), "proxy": (61, 78, 127, 246)}
PARAMETERS = 7_110_664_192
REFERENCE = 74.568936

MANIFEST_DOC = {
    "kind": "reward_model", "task": TASK, "question_id": "04-reward-model-rewardbench",
    "agent": "claude-sonnet-5 / Claude Code 2.1.220 / xhigh",
    "base_model": "Mistral-7B-Instruct-v0.2", "train_pairs": 8192,
    "proxy_evaluator": PROXY, "final_evaluator": FINAL,
    "notes": "seed 004: multi-seed LoRA snapshot soup; severe regression",
    "reference": {"reference_id": f"{TASK}/shipped", "evaluator": FINAL, "split": "full",
                  "n": FULL_N, "score": REFERENCE, "direction": "maximize",
                  "protocol": "same-protocol shipped single-run reference (seed-sensitive)",
                  "train_s": 3353.29, "score_s": 208.24, "peak_mem_mib": 26592},
    "baseline": {"micro_batch": 1, "grad_accum": 64, "learning_rate": 5e-6, "max_steps": 252,
                 "lora_rank": 128, "lora_alpha": 256, "lora_dropout": 0.05,
                 "save_progress": [126, 252], "max_retained": 3},
}

_FULL = dict(pairs=8192, micro_batch=1, grad_accum=64, seed=42)
JOB_ROWS = [
    dict(job="U-01/smoke", unit="U-01", title="smoke run, micro-batch 1", pairs=256,
         steps_planned=4, steps_done=4, micro_batch=1, grad_accum=64, members=1, seconds=112.2,
         peak_mem_gb=19.58, status="completed"),
    dict(job="U-01/mb8", unit="U-01", title="micro-batch 8 probe (no proxy receipt)", pairs=512,
         steps_planned=6, steps_done=6, micro_batch=8, grad_accum=8, members=1, seconds=90.4,
         peak_mem_gb=39.28, status="completed"),
    *[dict(job=f"U-02/lr{lr}", unit="U-02", title=f"learning-rate scan {lr}", **_FULL,
           steps_planned=64, steps_done=64, learning_rate=float(lr), members=1,
           status="completed") for lr in ("5e-6", "1.5e-5", "3e-5")],
    dict(job="U-03/len256", unit="U-03", title="256-step training-length curve", **_FULL,
         steps_planned=256, steps_done=256, learning_rate=3e-5, members=1, status="completed"),
    dict(job="U-04/tiny-soup", unit="U-04", title="two tiny soup members, GPU accumulator",
         members=2, status="completed", notes="both exported valid full models"),
    dict(job="U-04/cpu-accumulator", unit="U-04", title="float32 soup accumulator on the CPU",
         members=2, status="oom", notes="host-memory OOM at the 64 GiB limit",
         host_mem_limit_gib=64),
    dict(job="U-05/member1", unit="U-05", title="one 64-step soup member", **_FULL,
         steps_planned=64, steps_done=64, learning_rate=3e-5, members=1, status="completed"),
    dict(job="U-05/soup2", unit="U-05", title="two-member soup (mean of members 1-2)",
         pairs=8192, members=2, status="completed", submitted=True),
    dict(job="U-05/member3", unit="U-05", title="third soup member", **{**_FULL, "seed": 44},
         steps_planned=64, steps_done=15, learning_rate=3e-5, members=1, status="killed",
         notes="killed at 15/64 steps with 41:52 remaining", remaining_s=2512),
    dict(job="formal", unit=None, title="formal replay: seeded LoRA snapshot soup", **_FULL,
         steps_planned=3072, steps_done=3072, members=32, seconds=40688.22, status="completed",
         steps_per_member=96),
]

# (job, progress, split, score, se or None: 1.03x binomial, (chat, chat hard, safety) or None)
EVALUATIONS = [
    ("U-01/smoke", 4, "proxy", 56.9188, 2.2956, (70.0, 45.0, 55.0)),
    ("U-02/lr5e-6", 64, "proxy", 67.0851, None, (84.0, 55.0, 66.0)),
    ("U-02/lr1.5e-5", 64, "proxy", 67.8677, None, (84.5, 56.0, 67.0)),
    ("U-02/lr3e-5", 64, "proxy", 70.9538, None, (86.0, 59.0, 70.0)),
    ("U-03/len256", 64, "proxy", 78.0483, None, (90.1, 62.3, 80.5)),
    ("U-03/len256", 128, "proxy", 73.8710, None, (88.4, 58.9, 77.2)),
    ("U-03/len256", 192, "proxy", 73.7588, None, (87.9, 58.1, 76.8)),
    ("U-03/len256", 256, "proxy", 73.9477, None, (87.6, 57.7, 76.1)),
    ("U-05/member1", 64, "proxy", 66.5338, 2.2180, (83.2, 63.51, 70.4)),
    ("U-05/soup2", 128, "proxy", 72.2013, 2.1070, (82.9, 54.56, 71.1)),
    ("formal", 2880, "full", 37.3628, 0.9585, (52.2, 31.4, 35.8)),
    ("formal", 2976, "full", 36.9610, 0.9639, (51.7, 31.0, 35.3)),
    ("formal", 3072, "full", 38.3250, 0.9680, (53.6, 32.1, 36.9)),
    ("formal", 3072, "proxy_rows", 34.9698, 2.2306, (50.3, 29.2, 33.6)),
]

BUDGETS = {
    "exploration": {"wall_clock_s": 14400, "elapsed_s": 12180, "stop_reason": "submitted"},
    "formal": {"wall_clock_s": 42600, "reserve_s": 600, "train_s": 40688.22,
               "elapsed_s": 40737.569, "stop_reason": "wall_clock_budget_exhausted",
               "steps": 3072, "members": 32, "steps_per_member": 96,
               "snapshots_published": 32, "snapshots_retained": 3},
}


def write_rm_run(root: str | Path) -> Path:
    """Write data root 004's run under `root`; returns the run directory."""
    run_dir = Path(root) / RM_RUN
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / MANIFEST, MANIFEST_DOC)
    write_json(run_dir / OUTCOME, {"phases": BUDGETS})
    write_jsonl(run_dir / JOBS, [_job(row) for row in JOB_ROWS])
    write_jsonl(run_dir / ARTIFACTS, _artifacts())
    write_jsonl(run_dir / STEPS, _smoke_steps())
    for row in EVALUATIONS:
        write_evaluation_files(run_dir, _summary(*row))
    return run_dir


def _job(row: dict) -> dict:
    phase = "formal" if row["job"] == "formal" else "exploration"
    return {"phase": phase, **{k: v for k, v in row.items() if v is not None}}


def _artifacts() -> list[dict]:
    lora = dict(format="lora_delta", loadable=True, retained=False, members=1)
    out = [dict(job="U-01/smoke", progress=4, path="exploration/U-01/smoke/checkpoint-4", **lora)]
    out += [dict(job=f"U-02/lr{lr}", progress=64, path=f"exploration/U-02/lr{lr}/checkpoint-64",
                 **lora) for lr in ("5e-6", "1.5e-5", "3e-5")]
    out += [dict(job="U-03/len256", progress=p, path=f"exploration/U-03/checkpoint-{p}", **lora)
            for p in (64, 128, 192, 256)]
    full = dict(format="full", dtype="bfloat16", parameters=PARAMETERS, loadable=True,
                retained=False)
    out += [dict(job="U-05/member1", progress=64, path="exploration/U-05/member1", members=1,
                 **full),
            dict(job="U-05/soup2", progress=128, path="exploration/U-05/soup2", members=2,
                 **full)]
    for m in range(1, 33):  # 32 cumulative snapshots; the three with greatest progress kept
        retained = m > 29
        out.append(dict(job="formal", progress=96 * m, path=f"formal/snapshots/progress-{96 * m}",
                        format="full", dtype="bfloat16", parameters=PARAMETERS,
                        loadable=True if retained else None, retained=retained, members=m))
    return out


def _smoke_steps() -> list[dict]:
    losses = (0.6931, 0.6874, 0.6802, 0.6755)
    return [{"job": "U-01/smoke", "step": s + 1, "member": 0, "loss": loss,
             "accuracy": (0.50, 0.53, 0.56, 0.58)[s], "lr": 5e-6, "grad_norm": (4.1, 3.6, 3.2, 2.9)[s],
             "seconds": 28.05, "peak_mem_gib": round(19.58e9 / 2**30, 2)}
            for s, loss in enumerate(losses)]


def _summary(job: str, progress: int, split: str, score: float, se: float | None,
             sections: tuple | None) -> dict:
    n = FULL_N if split == "full" else PROXY_N
    phase = "formal" if job == "formal" else "exploration"
    evaluator = PROXY if split == "proxy" else FINAL
    unit = None if job == "formal" else job.split("/")[0]
    summary = {"evaluation_id": f"{job.replace('/', '_')}_p{progress}_{split}", "job": job,
               "phase": phase, "progress": progress, "evaluator": evaluator, "split": split,
               "direction": "maximize", "n": n, "score": score,
               "se": se if se is not None else round(1.03 * binomial_se(score, n), 4)}
    if unit:
        summary["unit"] = unit
    if sections:
        summary["sections"] = _section_scores(score, sections, split)
    return summary


def binomial_se(score: float, n: int) -> float:
    """100 * sqrt(p(1-p)/n) for a score in percent."""
    p = score / 100
    return 100 * math.sqrt(p * (1 - p) / n)


def _section_scores(score: float, three: tuple, split: str) -> dict:
    """The three given sections and Reasoning, chosen so the four average to the score."""
    values = (*three, round(4 * score - sum(three), 4))
    sizes = SECTION_N["full" if split == "full" else "proxy"]
    return {name: {"score": v, "n": n} for name, v, n in zip(SECTIONS, values, sizes)}


# --- planted bad inputs (tests) -----------------------------------------------------------------

FAULTS = {
    "missing_receipt": "formal_p2976_full",
    "mismatched_receipt": "formal_p2880_full",
    "score_120": "U-02_lr3e-5_p64_proxy",
    "fourth_retained": 2784,
}


def plant_rm_faults(run_dir: str | Path, faults=tuple(FAULTS)) -> dict:
    """Plant bad inputs (all four by default) into a written run; returns what was planted.

    * missing_receipt: the receipt of a final score is deleted;
    * mismatched_receipt: a final summary is edited after its receipt was written;
    * score_120: a proxy score set to 120 (its receipt rewritten, so only the value is bad);
    * fourth_retained: snapshot 2784 marked retained (and loadable), a fourth one.
    """
    unknown = set(faults) - set(FAULTS)
    if unknown:
        raise ValueError(f"unknown fault(s) {sorted(unknown)}; known: {', '.join(FAULTS)}")
    folder = Path(run_dir) / "evaluations"
    if "missing_receipt" in faults:
        receipt_path(folder / f"{FAULTS['missing_receipt']}.json").unlink()
    if "mismatched_receipt" in faults:
        _edit_summary(folder / f"{FAULTS['mismatched_receipt']}.json", score=39.1)
    if "score_120" in faults:
        summary = _edit_summary(folder / f"{FAULTS['score_120']}.json", score=120.0)
        write_evaluation_files(run_dir, summary)  # a fresh receipt: only the value is bad
    if "fourth_retained" in faults:
        _retain(Path(run_dir) / ARTIFACTS, FAULTS["fourth_retained"])
    return {name: FAULTS[name] for name in faults}


def _edit_summary(path: Path, **changes) -> dict:
    summary = json.loads(path.read_text("utf-8"))
    summary.update(changes)
    path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", "utf-8")
    return summary


def _retain(artifacts: Path, progress: int) -> None:
    rows = [json.loads(line) for line in artifacts.read_text("utf-8").splitlines()]
    for row in rows:
        if row["job"] == "formal" and row["progress"] == progress:
            row.update(retained=True, loadable=True)
    write_jsonl(artifacts, rows)


__all__ = ["RM_RUN", "write_rm_run", "plant_rm_faults", "FAULTS", "binomial_se"]
