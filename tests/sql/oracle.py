"""docs/metrics.md recomputed in plain Python straight from a data root's FILES (not the warehouse).

The independent side of the view acceptance test: it parses the jsonl, summary and timing
files itself and applies docs/metrics.md as written, plus the documented decisions of the views
(0-record task-rounds: counts 0, rates NULL; duplicate timing rows: the last one shown;
first round = the lowest round with a node or summary file). Run metadata (arm, resume
links) is config, read from the manifests like ingest does; caps from the arm registry.
"""
from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

NODE_FILE = re.compile(r"^(?P<task>.+?)__(?P<ts>\d+)\.jsonl$")
SUMMARY_FILE = re.compile(r"^(?P<task>.+?)__summary_(?P<ts>\d+)\.json$")
ROUND_DIR = re.compile(r"^round_(?P<n>\d+)$")
PHASES = ("update_weights", "gen", "old_log_prob", "ref", "adv", "update_actor", "save_checkpoint")
STATUS_RATES = {"valid_rate": "ok", "crash_rate": "crashed", "timeout_rate": "timeout",
                "no_code_rate": "no_code", "no_submission_rate": "no_submission",
                "invalid_submission_rate": "invalid_submission"}


@dataclass
class Root:
    records: dict = field(default_factory=lambda: defaultdict(list))  # (run, round, task) -> [rec]
    summaries: dict = field(default_factory=dict)                     # (run, round, task) -> dict
    task_rounds: set = field(default_factory=set)                     # keys with any file
    timing: dict = field(default_factory=lambda: defaultdict(list))   # run -> [row] in file order
    runs: set = field(default_factory=set)


def read_root(root: Path) -> Root:
    out = Root()
    for run_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        rounds = [d for d in run_dir.iterdir() if d.is_dir() and ROUND_DIR.match(d.name)]
        timing = run_dir / "timing.jsonl"
        if not rounds and not timing.exists():
            continue  # not a run directory (e.g. wandb_exports/)
        out.runs.add(run_dir.name)
        for round_dir in rounds:
            _read_round(out, run_dir.name, int(ROUND_DIR.match(round_dir.name)["n"]), round_dir)
        if timing.exists():
            out.timing[run_dir.name] = [json.loads(line) for line in
                                        timing.read_text().splitlines() if line.strip()]
    return out


def _read_round(out: Root, run: str, rnd: int, round_dir: Path) -> None:
    for path in sorted(round_dir.iterdir()):
        if m := SUMMARY_FILE.match(path.name):
            key = (run, rnd, m["task"])
            out.summaries[key] = json.loads(path.read_text())
            out.task_rounds.add(key)
        elif m := NODE_FILE.match(path.name):
            key = (run, rnd, m["task"])
            out.task_rounds.add(key)
            out.records[key] += [json.loads(line) for line in path.read_text().splitlines()
                                 if line.strip()]


# --- small helpers ---------------------------------------------------------------------------

def ratio(num, den):
    return None if not den else num / den


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


# --- per task-round --------------------------------------------------------------------------

def task_round_metrics(root: Root, caps: dict) -> dict:
    return {key: _task_round(root.records.get(key, []), key in root.summaries, caps.get(key[0]))
            for key in root.task_rounds}


def _task_round(recs: list[dict], has_summary: bool, cap) -> dict:
    n = len(recs)
    ok = [r for r in recs if r.get("status") == "ok"]
    row = {"nodes": n, "valid": len(ok),
           "valid_rewards_out_of_range": sum(not (r.get("reward") is not None and 0 <= r["reward"] <= 1) for r in ok)}
    for column, status in STATUS_RATES.items():
        row[column] = ratio(sum(r.get("status") == status for r in recs), n)
    for mode in ("draft", "improve", "debug"):
        row[f"{mode}_rate"] = ratio(sum(r.get("mode") == mode for r in recs), n)
    rewards = [r.get("reward") for r in recs]
    row["reward_node_mean"] = mean(rewards)
    row["valid_reward_mean"] = mean([r["reward"] for r in ok])
    row["draft_reward_mean"] = mean([r["reward"] for r in ok if r.get("mode") == "draft"])
    row["reward_best"] = max((v for v in rewards if v is not None), default=None)
    ranked = [r for r in ok if r.get("oriented") is not None]
    best = min(ranked, key=lambda r: (-r["oriented"], r["id"])) if ranked else None
    row["best_test_metric_recount"] = best["test_metric"] if best else None
    groups = defaultdict(set)
    for r in recs:
        if r.get("sibling_group") is not None:
            groups[r["sibling_group"]].add(r.get("reward"))
    row["groups"] = len(groups)
    row["groups_with_signal_rate"] = ratio(sum(len(v) > 1 for v in groups.values()), len(groups))
    row["reward_spread"] = int(len({v for v in rewards if v is not None}) > 1)
    # a record without response_token_ids has no length: left out of the mean, never clipped
    lengths = [len(r["response_token_ids"]) if isinstance(r.get("response_token_ids"), list)
               else None for r in recs]
    row["mean_response_tokens"] = mean(lengths)
    known = [x for x in lengths if x is not None]
    row["resp_clip_rate"] = None if cap is None else ratio(sum(x >= cap for x in known), n)
    row["clipped_at_cap"] = None if cap is None else sum(x == cap for x in known)
    row["complete"] = int(has_summary)
    return row


# --- per round -------------------------------------------------------------------------------

def round_metrics(root: Root, trm: dict) -> dict:
    keys = {(run, rnd) for run, rnd, _ in root.task_rounds}
    return {key: _round(root, trm, *key) for key in keys}


def _round(root: Root, trm: dict, run: str, rnd: int) -> dict:
    tasks = [m for (r, k, _), m in trm.items() if (r, k) == (run, rnd) and m["nodes"] > 0]
    recs = [x for (r, k, _), v in root.records.items() if (r, k) == (run, rnd) for x in v]
    sums = [s for (r, k, _), s in root.summaries.items() if (r, k) == (run, rnd)]
    timing = [t for t in root.timing.get(run, []) if t["step"] == rnd]
    row = {"tasks": len(tasks), "tasks_with_spread": sum(m["reward_spread"] for m in tasks),
           "nodes": len(recs), "fresh_drafts": sum(r.get("mode") == "draft" for r in recs),
           "gen_llm_seconds": _sum_or_none([s.get("gen_llm_seconds") for s in sums]),
           "gen_exec_seconds": _sum_or_none([s.get("gen_exec_seconds") for s in sums]),
           "timing_rows": len(timing)}
    row.update(_timing(timing[-1] if timing else None, len(recs)))
    return row


def _sum_or_none(values):
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def _timing(t: dict | None, nodes: int) -> dict:
    if t is None:
        return {"step": None, "total_s": None, "phase_sum_gap": None, "per_node_step_s": None,
                **{f"{p}_s": None for p in PHASES}, **{f"phase_share_{p}": None for p in PHASES}}
    total, phases = t["total_s"], t["phases_s"]
    row = {"step": t["step"], "total_s": total,
           "phase_sum_gap": abs(sum(phases.values()) - total),
           "per_node_step_s": ratio(total, nodes)}
    for p in PHASES:
        row[f"{p}_s"] = phases.get(p)
        row[f"phase_share_{p}"] = None if p not in phases else ratio(phases[p], total)
    return row


# --- per run ---------------------------------------------------------------------------------

def lineage(run: str, manifest: dict) -> list[str]:
    chain = [run]
    while (entry := manifest.get(chain[-1])) and entry.get("resumed_from"):
        nxt = entry["resumed_from"]["run"]
        if nxt in chain:
            break
        chain.append(nxt)
    return chain


def run_metrics(root: Root, trm: dict, manifest: dict) -> dict:
    return {run: _run(root, trm, manifest, run) for run in root.runs}


def _run(root: Root, trm: dict, manifest: dict, run: str) -> dict:
    recs = [x for (r, _, _), v in root.records.items() if r == run for x in v]
    rounds_with = {k for (r, k, _), v in root.records.items() if r == run and v}
    steps = {t["step"] for t in root.timing.get(run, [])}
    chain = lineage(run, manifest)
    with_field = [r for r in recs if "resources" in r]
    row = {"nodes": len(recs), "rounds": len(rounds_with),
           "steps_logged": len(root.timing.get(run, [])),
           "steps_missing": len(rounds_with - steps),
           "root_run_id": chain[-1], "lineage_depth": len(chain) - 1,
           "decl_malformed_count": sum(r.get("decl_malformed") is True for r in recs),
           "gpu_idle_kills": sum(r.get("exc_type") == "GpuIdleError" for r in recs),
           "gpu_declared_rate": (ratio(sum(((r.get("resources") or {}).get("gpu") or 0) >= 1
                                           for r in recs), len(recs)) if with_field else None)}
    row.update(_parent_rates(root, chain, recs))
    row.update(_health_gate(root, trm, run))
    return row


def _parent_rates(root: Root, chain: list[str], recs: list[dict]) -> dict:
    by_run = [{r["id"]: r.get("status") for (run, _, _), v in sorted(root.records.items())
               if run == ancestor for r in v} for ancestor in chain]
    improve, debug = [], []
    for r in recs:
        parent = next((ids[r["parent_id"]] for ids in by_run if r.get("parent_id") in ids), "?")
        if parent == "?":
            continue
        if r.get("mode") == "improve" and parent == "ok":
            improve.append(r.get("status") == "ok")
        if r.get("mode") == "debug" and parent != "ok":
            debug.append(r.get("status") == "ok")
    return {"improve_keeps_valid": ratio(sum(improve), len(improve)),
            "debug_fixes_parent": ratio(sum(debug), len(debug))}


def _health_gate(root: Root, trm: dict, run: str) -> dict:
    rounds = [k for (r, k, _) in trm if r == run]
    if not rounds:
        return {"first_round": None, "health_gate_step1": None}
    first = min(rounds)
    tasks = [key for key in trm if key[:2] == (run, first)]
    every_task = all(trm[key]["valid"] >= 1 for key in tasks)
    ok_rewards = [r.get("reward") for key in tasks for r in root.records.get(key, [])
                  if r.get("status") == "ok"]
    in_range = all(v is not None and 0 <= v <= 1 for v in ok_rewards)
    return {"first_round": first, "health_gate_step1": every_task and in_range}


def run_status_counts(root: Root) -> dict:
    counts = Counter((run, r.get("status")) for (run, _, _), v in root.records.items() for r in v)
    return {key: {"n": n} for key, n in counts.items()}


def decision_rule(root: Root, trm: dict, manifest: dict) -> dict:
    out = {}
    for (run, k, task), m in trm.items():
        base_run = lineage(run, manifest)[-1]
        base_rounds = [kk for (r, kk, _) in trm if r == base_run]
        first = min(base_rounds) if base_rounds else None
        base = trm.get((base_run, first, task), {}).get("valid_reward_mean")
        now = m["valid_reward_mean"]
        delta = None if now is None or base is None else now - base
        out[(run, task, k)] = {"root_run_id": base_run, "first_round": first, "delta": delta,
                               "moved": None if delta is None else delta > 0}
    return out
