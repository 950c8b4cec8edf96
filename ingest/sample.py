"""Synthetic data roots in the documented shapes (docs/data-roots.md, data roots 000 and 002).

`write_sample_root(out)` writes a small (a few MB, about a second) root that holds both styles
and every edge case docs/data-roots.md lists, and that is CLEAN: it passes every invariant of
docs/metrics.md, so tests of views and checks can plant their own violations in a copy.
The run ids are the real ones of data roots 000 and 002, so the shipped manifests cover them and
`warehouse ingest OUT` needs no flags; `sample_manifest()` returns those entries.

`write_bench_root(out, target_mb)` writes a large root of realistic 2-12 MB node files for
`benchmarks/ingest_bench.py`. Both are deterministic given the seed.

What the sample holds (000 style: schema C, 16 records per task-round, one sibling group per
expansion, `step` 0 in records; 002 style: schemas A and B, 64 = 4 expansions x 16):

* `20260719_045416_27b_mix4_hr` rounds 1-3, round 3 partial (cactus 7 and English 14 records
  without summaries), timing steps 1-2 (step 2 saved a checkpoint), a crashed node clipped
  exactly at the 12288 cap, a group where every sibling crashed, a tie in `oriented`.
* `20260719_160958_27b_m4hr16k` a dangling symlink (LOST run).
* `20260720_020550_27b_m4hr24k` round 6 only, cut short (12/10/4/0 records, no summaries,
  the 0-record English task has an empty jsonl and no tree/transcript), no timing.jsonl.
* `20260720_041422_27b_m4hr24ku6` rounds 6-7 with timing 6-7 (no_code nodes at the 24576 cap).
* `20260720_160605_27b_m4hr24ku6b` resumed at round 11 (parents in hr24k_u6), rounds 11-12,
  timing step 11 only: round 12 rolled out fully but has no timing row.
* `probe_*` / `smoke_*` round_0 with 2 nodes of another model.
* 002: a stress test, spooky_1e4 with an empty 0-byte stub round, spooky_3e5 with a partial
  round (30 of 64), spooky_3e5_k8s whose last round has no timing row, cactus_gpu (schema B,
  save_checkpoint on its last step, W&B export with fewer history rows than timing rows),
  dogscats_gpu (partial round 1, 49 of 64, no timing.jsonl), under `wandb_exports/`.
* 004: data root 004's reward-model run (`ingest/rm_sample.py`, docs/reward_model.md): every
  figure the seed publishes, clean; `ingest.rm_sample.plant_rm_faults` plants the four bad
  inputs the reward-model checks must catch, for tests.
"""
from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ingest.rm_sample import write_rm_run
from warehouse import vocabulary as vocab
from warehouse.tree_rules import best_node, expansion_mode
from warehouse.vocabulary import CHECKPOINT_PHASE, STATUSES, STEP_PHASES, node_keys


# task -> (low, high, higher_is_better) of its raw competition metric
METRIC = {
    "aerial-cactus-identification": (0.85, 0.999, True),
    "dogs-vs-cats-redux-kernels-edition": (0.05, 0.70, False),
    "text-normalization-challenge-english-language": (0.90, 0.995, True),
    "text-normalization-challenge-russian-language": (0.90, 0.98, True),
    "spooky-author-identification": (0.35, 1.10, False),
    "plant-pathology-2020-fgvc7": (0.60, 0.98, True),
    "denoising-dirty-documents": (0.02, 0.20, False),
}
TASKS_000 = (
    "aerial-cactus-identification",
    "dogs-vs-cats-redux-kernels-edition",
    "text-normalization-challenge-english-language",
    "text-normalization-challenge-russian-language",
)
GPU_TASKS = {"aerial-cactus-identification", "dogs-vs-cats-redux-kernels-edition",
             "plant-pathology-2020-fgvc7"}
CRASH_TYPES = ("NameError", "ValueError", "KeyError", "ModuleNotFoundError", "RuntimeError")
NO_CODE_TOKENS_002 = 8192  # the 9B sampler's max_new_tokens (data root 002 does not state its cap)

SCHEMA_A = node_keys("A")
KEYS = {"A": SCHEMA_A, "B": SCHEMA_A + node_keys("B"), "C": SCHEMA_A + node_keys("B") + node_keys("C")}


@dataclass
class RunSpec:
    """One synthetic run: which rounds, how many records per task, what timing exists."""

    run_id: str
    style: str                      # "000" (16 per task-round) or "002" (4 x 16)
    schema: str                     # "A", "B" or "C"
    tasks: tuple[str, ...]
    rounds: tuple[int, ...]
    partial: dict = field(default_factory=dict)   # (round, task) -> records written
    no_summary: set = field(default_factory=set)  # (round, task) without a summary
    timing_steps: tuple[int, ...] | None = None   # None: no timing.jsonl at all
    checkpoint_steps: tuple[int, ...] = ()
    response_cap: int | None = None
    model: str = "/data2/peijia/models/qwen3_5_27b"
    parent_run: str | None = None   # lineage ancestor whose nodes the first round may expand
    status_weights: tuple[float, ...] = (0.45, 0.35, 0.08, 0.0, 0.06, 0.06)
    fresh_drafts: bool = False      # 000: the seed fix lets later rounds draft again
    idle_exc: str = vocab.CPU_IDLE_ERROR
    wandb_run: str | None = None
    wandb_history_rows: int = 0
    plant: tuple[str, ...] = ()     # statuses forced into the run's first group


def sample_specs() -> list[RunSpec]:
    """The runs of the default sample root, ancestors before their descendants."""
    hr, u6 = "20260719_045416_27b_mix4_hr", "20260720_041422_27b_m4hr24ku6"
    en, ru = TASKS_000[2], TASKS_000[3]
    cactus, dogs = TASKS_000[0], TASKS_000[1]
    spooky = ("spooky-author-identification",)
    q02 = dict(style="002", model="/data2/peijia/models/qwen3_5_9b", rounds=(1, 2),
               status_weights=(0.25, 0.58, 0.1, 0.0, 0.03, 0.04))
    return [
        RunSpec(hr, "000", "C", TASKS_000, (1, 2, 3), partial={(3, cactus): 7, (3, en): 14},
                no_summary={(3, cactus), (3, en)}, timing_steps=(1, 2), checkpoint_steps=(2,),
                response_cap=12288, plant=(vocab.TIMEOUT, vocab.NO_SUBMISSION, vocab.INVALID_SUBMISSION)),
        RunSpec("20260720_020550_27b_m4hr24k", "000", "C", TASKS_000, (6,),
                partial={(6, cactus): 12, (6, dogs): 10, (6, ru): 4, (6, en): 0},
                no_summary={(6, t) for t in TASKS_000}, response_cap=24576, parent_run=hr),
        RunSpec(u6, "000", "C", TASKS_000, (6, 7), timing_steps=(6, 7), response_cap=24576,
                parent_run=hr, plant=(vocab.NO_CODE,)),
        RunSpec("20260720_160605_27b_m4hr24ku6b", "000", "C", TASKS_000, (11, 12),
                timing_steps=(11,), response_cap=24576, parent_run=u6, fresh_drafts=True),
        RunSpec("probe_bigresults_denoising", "000", "C", ("denoising-dirty-documents",), (0,),
                model="gpt-5.6-luna", status_weights=(1, 0, 0, 0, 0, 0)),
        RunSpec("smoke_hr_denoising", "000", "C", ("denoising-dirty-documents",), (0,),
                model="gpt-5.6-luna", status_weights=(0, 1, 0, 0, 0, 0)),
        RunSpec("smoke_hr_textnorm", "000", "C", (en,), (0,), model="gpt-5.6-luna",
                status_weights=(1, 0, 0, 0, 0, 0)),
        RunSpec("20260701_223600", schema="A", tasks=spooky, timing_steps=(1, 2), **q02),
        RunSpec("20260701_231713", schema="A", tasks=spooky, **{**q02, "rounds": (1, 2, 3)},
                partial={(3, spooky[0]): 0}, no_summary={(3, spooky[0])}, timing_steps=(1, 2),
                wandb_run="tree_grpo_9b_spooky_1e4", wandb_history_rows=2),
        RunSpec("20260702_020809", schema="A", tasks=spooky, partial={(2, spooky[0]): 30},
                no_summary={(2, spooky[0])}, timing_steps=(1,), **q02),
        RunSpec("20260702_041208", schema="A", tasks=spooky, timing_steps=(1,), **q02,
                plant=(vocab.NO_CODE, vocab.INVALID_SUBMISSION, vocab.NO_SUBMISSION)),
        RunSpec("20260702_152844", schema="B", tasks=("aerial-cactus-identification",),
                timing_steps=(1, 2), checkpoint_steps=(2,), idle_exc=vocab.GPU_IDLE_ERROR,
                wandb_run="tree_grpo_9b_cactus_gpu", wandb_history_rows=1, **q02,
                plant=(vocab.TIMEOUT, vocab.INVALID_SUBMISSION)),
        RunSpec("20260702_221522", schema="B", tasks=("dogs-vs-cats-redux-kernels-edition",),
                **{**q02, "rounds": (1,)}, partial={(1, "dogs-vs-cats-redux-kernels-edition"): 49},
                no_summary={(1, "dogs-vs-cats-redux-kernels-edition")}, idle_exc=vocab.GPU_IDLE_ERROR),
    ]


LOST_RUN = "20260719_160958_27b_m4hr16k"


def sample_manifest() -> dict[str, dict]:
    """The shipped manifest entries of the sample's runs (run id -> entry)."""
    from ingest.manifest import load_shipped

    wanted = {s.run_id for s in sample_specs()} | {LOST_RUN}
    return {run_id: entry for run_id, entry in load_shipped().items() if run_id in wanted}


def write_sample_root(out_dir: str | os.PathLike, seed: int = 0, *, payload_tokens: tuple[int, int]
                      = (30, 300)) -> Path:
    """Write the default sample root under `out_dir` (created); return its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    writer = _RootWriter(out, random.Random(seed), payload_tokens)
    for spec in sample_specs():
        writer.write_run(spec)
    writer.plant_lost_run(LOST_RUN)
    write_rm_run(out)
    writer.write_front_page()
    return out


# --- the writer ------------------------------------------------------------------------------

class _RootWriter:
    """Writes runs into one root, keeping every node it wrote so later runs can expand them."""

    def __init__(self, root: Path, rng: random.Random, payload_tokens: tuple[int, int],
                 text_scale: int = 1):
        self.root, self.rng = root, rng
        self.payload_tokens, self.text_scale = payload_tokens, text_scale
        self.pool: dict[tuple[str, str], list[dict]] = {}   # (run, task) -> nodes so far
        self.forced: set[str] = set()                        # edge cases already planted

    # runs
    def write_run(self, spec: RunSpec) -> None:
        run_dir = self.root / spec.run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        start = _run_start(spec.run_id)
        for task in spec.tasks:
            inherited = self.pool.get((spec.parent_run, task), []) if spec.parent_run else []
            self.pool[(spec.run_id, task)] = list(inherited)
        for rnd in spec.rounds:
            for t_index, task in enumerate(spec.tasks):
                ts = start + 3600 * (rnd - spec.rounds[0] + 1) + 97 * t_index
                self.write_task_round(spec, rnd, task, ts)
        if spec.timing_steps is not None:
            self.write_timing(run_dir, spec)
        if spec.wandb_run:
            self.write_wandb(spec)

    def write_task_round(self, spec: RunSpec, rnd: int, task: str, ts: int) -> None:
        round_dir = self.root / spec.run_id / f"round_{rnd}"
        round_dir.mkdir(parents=True, exist_ok=True)
        records = self.round_records(spec, rnd, task)
        node_file = round_dir / f"{task}__{ts}.jsonl"
        with open(node_file, "w", encoding="utf-8") as fh:
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        if records:
            (round_dir / f"{task}__{ts}__tree.txt").write_text(_tree_text(records), "utf-8")
            (round_dir / f"{task}__{ts}__transcript.md").write_text(
                _transcript_text(task, rnd, records), "utf-8")
        if (rnd, task) not in spec.no_summary:
            summary = self.summary(spec, rnd, task, ts, records)
            (round_dir / f"{task}__summary_{ts + 41}.json").write_text(
                json.dumps(summary, indent=2), "utf-8")

    def round_records(self, spec: RunSpec, rnd: int, task: str) -> list[dict]:
        key = (spec.run_id, task)
        before, records = list(self.pool[key]), []
        for step, size in _expansions(spec, rnd):
            parent = self.pick_parent(spec, rnd, task, step)
            group = self.sibling_group(spec, rnd, task, step, parent, size)
            records += group
            self.pool[key] += group
        # A partial round keeps a prefix; only written nodes may be parents later.
        records = records[: spec.partial.get((rnd, task), len(records))]
        self.pool[key] = before + records
        return records

    def pick_parent(self, spec: RunSpec, rnd: int, task: str, step: int) -> dict | None:
        pool = self.pool[(spec.run_id, task)]
        if spec.style == "002":
            return None if step < 2 or not pool else self.rng.choice(pool[-96:])
        draft_round = rnd == spec.rounds[0] and not spec.parent_run
        if draft_round or not pool or (spec.fresh_drafts and rnd != spec.rounds[0]
                                       and task == spec.tasks[0]):
            return None
        return self.rng.choice(pool[-48:])

    def sibling_group(self, spec: RunSpec, rnd: int, task: str, step: int, parent: dict | None,
                      size: int) -> list[dict]:
        group_id = self.hex_id()
        statuses = self.group_statuses(spec, rnd, task, size)
        nodes = [self.node(spec, rnd, task, step, group_id, parent, status)
                 for status in statuses]
        self.plant_tie(nodes, task)
        _finish_group(nodes, spec.schema)
        return nodes

    def group_statuses(self, spec: RunSpec, rnd: int, task: str, size: int) -> list[str]:
        if spec.run_id == "20260719_045416_27b_mix4_hr" and rnd == 2 and task == TASKS_000[2]:
            return [vocab.CRASHED] * size  # a group with no reward spread
        statuses = self.rng.choices(STATUSES, weights=spec.status_weights, k=size)
        if spec.run_id not in self.forced:  # plant the run's rare statuses in its first group
            self.forced.add(spec.run_id)
            for i, status in enumerate(spec.plant[: size - 2]):
                statuses[i + 1] = status
        return statuses

    def plant_tie(self, nodes: list[dict], task: str) -> None:
        ok = [n for n in nodes if n["status"] == vocab.OK]
        if len(ok) >= 3 and self.rng.random() < 0.5:
            ok[1]["test_metric"] = ok[0]["test_metric"]
            ok[1]["oriented"] = ok[0]["oriented"]
            ok[1]["reward"] = ok[0]["reward"]
            if ok[1].get("parent_oriented") is not None:
                ok[1]["improve_delta"] = round(ok[1]["oriented"] - ok[1]["parent_oriented"], 6)

    # one node
    def node(self, spec: RunSpec, rnd: int, task: str, step: int, group_id: str,
             parent: dict | None, status: str) -> dict:
        rec = {"id": self.hex_id(), "step": step if spec.style == "002" else 0, "round": rnd,
               "exp_id": task, "parent_id": parent["id"] if parent else None,
               "sibling_group": group_id, "mode": expansion_mode(parent)}
        rec.update(self.outcome(spec, task, status))
        rec.update(self.payload(spec, task, rec))
        if spec.schema in ("B", "C"):
            rec.update(self.schema_b(spec, task, rec))
        if spec.schema == "C":
            rec.update(self.schema_c(spec, task, rec, parent))
        return {key: rec.get(key) for key in KEYS[spec.schema]}

    def outcome(self, spec: RunSpec, task: str, status: str) -> dict:
        rng = self.rng
        out = {"status": status, "exc_type": None, "grade_error": None, "test_metric": None,
               "oriented": None, "source": None if spec.style == "000" else "none",
               "is_buggy": status != vocab.OK, "n_children": 0, "reward": vocab.FAILED_REWARD,
               "exec_time": round(rng.uniform(3, 900), 2)}
        if status == vocab.OK:
            low, high, higher = METRIC[task]
            metric = round(rng.uniform(low, high), 4)
            out.update(test_metric=metric, oriented=metric if higher else -metric,
                       source="grade", reward=_humanrank(metric, low, high, higher))
        elif status == vocab.CRASHED:
            roll = rng.random()
            if roll < 0.08:
                out.update(exc_type=spec.idle_exc, reward=vocab.IDLE_REWARD)
            elif roll < 0.10:  # an infrastructure failure, named as a cluster harness names it
                out.update(exc_type="PodEvictedError", reward=vocab.INFRASTRUCTURE_REWARD)
            else:
                out["exc_type"] = rng.choice(CRASH_TYPES)
        elif status == vocab.TIMEOUT:
            out["exc_type"] = vocab.TIMEOUT_EXC_TYPE
        elif status == vocab.INVALID_SUBMISSION:
            out["grade_error"] = "submission.csv has 4000 rows, expected 4001"
        elif status == vocab.NO_CODE:
            out["exec_time"] = None
        return out

    def payload(self, spec: RunSpec, task: str, rec: dict) -> dict:
        rng = self.rng
        n_tokens = rng.randint(*self.payload_tokens)
        if rec["status"] == vocab.NO_CODE:
            n_tokens = spec.response_cap or NO_CODE_TOKENS_002
        elif (spec.response_cap and "clipped" not in self.forced and rec["status"] == vocab.CRASHED
              and spec.run_id.endswith("mix4_hr")):
            n_tokens = spec.response_cap  # a crashed completion clipped exactly at the cap
            self.forced.add("clipped")
        code = "" if rec["status"] == vocab.NO_CODE else _code(task, rec["id"], self.text_scale)
        thinking = _words(rng, 40 * self.text_scale)
        return {
            "plan": _words(rng, 12), "code": code,
            "raw_completion": thinking + ("\n```python\n" + code + "\n```" if code else
                                          "\n```python\nimport pandas as pd\n"),
            "thinking": thinking,
            "prompt_messages": _prompt(task, rng, self.text_scale),
            "response_token_ids": [rng.randrange(151_000) for _ in range(n_tokens)],
            "response_logprobs": [round(-rng.expovariate(3.0), 3) for _ in range(n_tokens)],
            "term_tail": _term_tail(rec),
        }

    def schema_b(self, spec: RunSpec, task: str, rec: dict) -> dict:
        rng = self.rng
        gpu = task in GPU_TASKS
        declared = rng.random() < 0.7
        malformed = not declared and rng.random() < 0.3
        resources = ({"cpu": 8, "mem": 32 if gpu else 16, "ephemeral": 4, "gpu": 1 if gpu else 0}
                     if declared else None)
        timings = None if rec["status"] == vocab.NO_CODE else {
            "pending": round(rng.uniform(1, 60), 2), "stage": round(rng.uniform(0.5, 5), 2),
            "exec": rec["exec_time"], "retrieve": round(rng.uniform(0.2, 3), 2)}
        return {"resources": resources, "decl_malformed": malformed,
                "decl_miss_reason": ("malformed # /// script block (unclosed or duplicated)"
                                     if malformed else None),
                "decl_deps_ignored": False,
                "where": f"k8s:pq-exec-{spec.run_id.replace('_', '')[:14]}-{rec['id'][:6]}-a1",
                "exec_timings": timings,
                "gpu_util": None}

    def schema_c(self, spec: RunSpec, task: str, rec: dict, parent: dict | None) -> dict:
        rng = self.rng
        gpu = task in GPU_TASKS and rec["status"] != vocab.NO_CODE
        p_oriented = parent["oriented"] if parent else None
        return {
            "depth": parent["depth"] + 1 if parent else 0,
            "returncode": _returncode(rec),
            "parent_oriented": p_oriented,
            "parent_P": round(rng.uniform(0.05, 0.6), 4) if parent else None,
            "parent_P_evidence": ({"n_valid": rng.randint(0, 16), "temperature": 1.0}
                                  if parent else None),
            "improve_delta": (round(rec["oriented"] - p_oriented, 6)
                              if parent and rec["oriented"] is not None
                              and p_oriented is not None else None),
            "group_best": False, "medal": None, "attempt": 1,
            "cpu_util_mean": round(rng.uniform(0.1, 0.9), 3),
            "cpu_util_peak": round(rng.uniform(0.9, 1.0), 3),
            "gpu_util_peak": round(rng.uniform(0.2, 1.0), 3) if gpu else None,
            "gpu_mem_used_gi": round(rng.uniform(2, 40), 2) if gpu else None,
            "mem_peak_gi": round(rng.uniform(1, 30), 2),
            "gpu_name": "NVIDIA A100-SXM4-80GB" if gpu else None,
            "kube_node": f"node-{rng.randint(1, 40):02d}.nrp-nautilus.io",
        }

    def hex_id(self) -> str:
        return "%012x" % self.rng.getrandbits(48)

    # round-level files
    def summary(self, spec: RunSpec, rnd: int, task: str, ts: int, records: list[dict]) -> dict:
        best = best_node(records)
        out = {"exp_id": task, "round": rnd, "model": spec.model}
        if spec.style == "000":
            out["exec_backend"] = "k8s"
        out.update({"adapter_path": "", "nodes": len(records),
                    "valid": sum(r["status"] == vocab.OK for r in records)})
        if spec.style == "000":
            out["buffer_nodes"] = len(self.pool[(spec.run_id, task)])
        out.update({
            "expansions": 1 if spec.style == "000" else 4, "phase": "train",
            "best_test_metric": best["test_metric"] if best else None,
            "best_node_id": best["id"] if best else None, "honest_test_metric": None,
            "rollout_file": f"data/rollouts/{spec.run_id}/round_{rnd}/{task}__{ts}.jsonl",
            "workspace": f"ws-{self.hex_id()[:8]}",
            "gen_llm_seconds": round(self.rng.uniform(300, 2400), 2),
            "gen_exec_seconds": round(self.rng.uniform(200, 3000), 2)})
        return out

    def write_timing(self, run_dir: Path, spec: RunSpec) -> None:
        lines = []
        for step in spec.timing_steps:
            phases = {p: round(self.rng.uniform(*_PHASE_RANGE[p]), 3)
                      for p in STEP_PHASES if p != CHECKPOINT_PHASE or step in spec.checkpoint_steps}
            total = round(sum(phases.values()) + self.rng.uniform(0.0, 0.4), 3)
            lines.append(json.dumps({"step": step, "total_s": total, "phases_s": phases}))
        (run_dir / "timing.jsonl").write_text("\n".join(lines) + "\n", "utf-8")

    def write_wandb(self, spec: RunSpec) -> None:
        folder = self.root / "wandb_exports" / spec.wandb_run
        folder.mkdir(parents=True, exist_ok=True)
        lr = 1e-4 if spec.wandb_run.endswith("1e4") else 1e-5
        config = {"actor_rollout_ref.model.lora_rank": 32, "actor_rollout_ref.model.lora_alpha": 32,
                  "actor_rollout_ref.actor.optim.lr": lr, "algorithm.adv_estimator": "grpo_valid_only",
                  "trainer.default_local_dir": f"/data2/peijia/ml-agent-checkpoints/tree-grpo/{spec.wandb_run}"}
        (folder / "config.json").write_text(json.dumps(config, indent=2), "utf-8")
        rows = [{"_step": step, "reward_node_mean": round(self.rng.uniform(-0.5, 0.2), 4),
                 "actor/kl_loss": round(self.rng.uniform(0, 0.01), 6),
                 "actor/grad_norm": round(self.rng.uniform(0.1, 2), 4)}
                for step in spec.timing_steps[: spec.wandb_history_rows]]
        (folder / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
        (folder / "summary.json").write_text(json.dumps({**rows[-1], "_runtime": 5400.0}), "utf-8")

    def plant_lost_run(self, run_id: str) -> None:
        link = self.root / run_id
        if not link.is_symlink():
            os.symlink("../training_verl/runs/qwen3_5_27b/data/rollouts/" + run_id, link)

    def write_front_page(self) -> None:
        (self.root / "README.md").write_text(
            "# Synthetic sample data root\n\nWritten by `warehouse sample` (ingest/sample.py): "
            "seed-000 and seed-002 shaped runs with every documented edge case, and seed 004's "
            "reward-model run.\n", "utf-8")
        sizes = sorted((str(p.relative_to(self.root)), p.stat().st_size)
                       for p in self.root.rglob("*") if p.is_file() and not p.is_symlink())
        (self.root / "FILES.txt").write_text("".join(f"{s}\t{p}\n" for p, s in sizes), "utf-8")


_PHASE_RANGE = {"update_weights": (20, 60), "gen": (1500, 4000), "old_log_prob": (60, 200),
                "ref": (60, 200), "adv": (0.5, 3), "update_actor": (300, 900), CHECKPOINT_PHASE: (20, 90)}


def _expansions(spec: RunSpec, rnd: int) -> list[tuple[int, int]]:
    """(expansion step, siblings) of one task-round."""
    if spec.run_id.startswith(("probe_", "smoke_")):
        return [(0, 2)]
    return [(s, 16) for s in range(4)] if spec.style == "002" else [(0, 16)]


def _finish_group(nodes: list[dict], schema: str) -> None:
    if schema == "C":
        best = best_node(nodes)
        for n in nodes:
            n["group_best"] = best is not None and n["id"] == best["id"]
            n["medal"] = "none" if n["status"] == vocab.OK else None


def _humanrank(metric: float, low: float, high: float, higher: bool) -> float:
    frac = (metric - low) / (high - low)
    return round(min(1.0, max(0.0, frac if higher else 1.0 - frac)), 3)


def _returncode(rec: dict) -> int | None:
    return {vocab.OK: 0, vocab.NO_SUBMISSION: 0, vocab.INVALID_SUBMISSION: 0, vocab.CRASHED: 1,
            vocab.TIMEOUT: -9}.get(rec["status"])


def _run_start(run_id: str) -> int:
    try:
        stamp = datetime.strptime(run_id[:15], "%Y%m%d_%H%M%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return 1784419200  # 2026-07-19, the pre-launch checks
    return int(stamp.timestamp())


_VOCAB = ("model", "features", "validation", "fold", "train", "predict", "loss", "augment",
          "resnet", "tokenizer", "baseline", "submission", "ensemble", "learning", "rate")


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_VOCAB) for _ in range(n))


def _prompt(task: str, rng: random.Random, scale: int) -> list[dict]:
    system = ("You are an expert ML engineer. Hard requirements: write one Python script that "
              "trains a model and writes ./submission/submission.csv. Put the whole script in "
              "one ```python fence; do not leave the fence open. ") * scale
    return [{"role": "system", "content": system},
            {"role": "user", "content": f"Competition: {task}\n" + _words(rng, 60 * scale)}]


def _code(task: str, node_id: str, scale: int) -> str:
    body = ("import pandas as pd\nimport numpy as np\n"
            f"# node {node_id} for {task}\n"
            "train = pd.read_csv('input/train.csv')\n"
            "model = fit(train)\n"
            "pd.DataFrame(predict(model)).to_csv('submission/submission.csv', index=False)\n")
    return body * scale


def _term_tail(rec: dict) -> str:
    if rec["exc_type"]:
        return f"Traceback (most recent call last):\n  ...\n{rec['exc_type']}: see above\n"
    return "fold 0 done\nvalidation score computed\nsubmission written\n"


def _tree_text(records: list[dict]) -> str:
    lines = [f"[{r['id']}] {r['mode']} {r['status']} test={r['test_metric']} "
             f"sib_grp={r['sibling_group']}" for r in records]
    best = best_node(records)
    groups = len({r["sibling_group"] for r in records})
    lines.append(f"nodes={len(records)} sibling_groups={groups}")
    lines.append(f"valid={sum(r['status'] == vocab.OK for r in records)} "
                 f"best={best['id'] if best else None}")
    return "\n".join(lines) + "\n"


def _transcript_text(task: str, rnd: int, records: list[dict]) -> str:
    best = best_node(records)
    head = (f"# {task} round {rnd}\n\nnodes: {len(records)}  valid: "
            f"{sum(r['status'] == vocab.OK for r in records)}  best: "
            f"{best['test_metric'] if best else None}\n\n## Tree\n")
    return head + "".join(f"|- {r['id'][:8]} {r['mode']} {r['status']}\n" for r in records)


# --- the benchmark root ----------------------------------------------------------------------

def write_bench_root(out_dir: str | os.PathLike, target_mb: float = 500, seed: int = 0,
                     file_mb: float | None = None, lengths: tuple[int, int] | None = None) -> Path:
    """Write a large 000-style root of 2-12 MB node files (or of about `file_mb` MB each,
    +/- 20%), about `target_mb` MB in all. Every node of a file has the same response length,
    unless `lengths` = (SHORTEST, CAP): then each node's is its own, log-uniform from SHORTEST
    to CAP with one in ten exactly at CAP (clipped), and the runs' response cap is CAP."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    writer = _BenchWriter(out, rng, file_mb, lengths)
    written, rnd = 0, 1
    while written < target_mb * 1e6:
        written += writer.write_round(rnd)
        rnd += 1
    return out


class _BenchWriter:
    """Fast: token ids and logprobs are slices of pre-generated pools, text repeats."""

    # measured: a file is ~20 KB of text plus ~250 bytes per token of each of its 16 nodes
    # (a token id and a logprob, ~15.6 bytes of JSON, 16 times)
    TEXT_BYTES, BYTES_PER_NODE_TOKEN = 20_000, 250

    CLIPPED_SHARE = 0.1  # with `lengths`: the share of responses exactly at the cap

    def __init__(self, root: Path, rng: random.Random, file_mb: float | None = None,
                 lengths: tuple[int, int] | None = None):
        self.root, self.rng, self.lengths = root, rng, lengths
        tokens = int((file_mb * 1e6 - self.TEXT_BYTES) / self.BYTES_PER_NODE_TOKEN) if file_mb else None
        self.tokens = (int(tokens * 0.8), int(tokens * 1.2)) if tokens else (8_000, 50_000)
        if lengths is not None and not 0 < lengths[0] <= lengths[1] <= 100_000:
            raise ValueError(f"lengths {lengths}: want 0 < SHORTEST <= CAP <= 100,000 tokens")
        self.ids = [rng.randrange(151_000) for _ in range(200_000)]
        self.logprobs = [round(-rng.expovariate(3.0), 3) for _ in range(200_000)]
        self.small = _RootWriter(root, rng, (30, 60))
        self.spec = RunSpec("20260801_000000_bench", "000", "C", TASKS_000, (1,),
                            timing_steps=None, response_cap=lengths[1] if lengths else 24576)
        (root / self.spec.run_id).mkdir(exist_ok=True)
        for task in TASKS_000:
            self.small.pool[(self.spec.run_id, task)] = []

    def _length(self, per_file: int) -> int:
        if self.lengths is None:
            return per_file
        shortest, cap = self.lengths
        if self.rng.random() < self.CLIPPED_SHARE:
            return cap
        return min(cap, int(shortest * (cap / shortest) ** self.rng.random()))

    def write_round(self, rnd: int) -> int:
        spec, total = self.spec, 0
        for t_index, task in enumerate(spec.tasks):
            per_node = self.rng.randint(*self.tokens)  # default: 16 nodes -> 2-12 MB files
            records = self.small.round_records(spec, rnd, task)
            self.small.pool[(spec.run_id, task)] = self.small.pool[(spec.run_id, task)][-48:]
            for rec in records:
                length = self._length(per_node)
                start = self.rng.randrange(200_000 - length)
                rec["response_token_ids"] = self.ids[start:start + length]
                rec["response_logprobs"] = self.logprobs[start:start + length]
                if rec["status"] == vocab.NO_CODE:
                    rec["status"], rec["exc_type"] = vocab.CRASHED, "SyntaxError"
                    rec["code"] = _code(task, rec["id"], 1)
            path = self.root / spec.run_id / f"round_{rnd}" / f"{task}__{1785000000 + rnd * 1000 + t_index}.jsonl"
            path.parent.mkdir(exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                for rec in records:
                    fh.write(json.dumps(rec) + "\n")
            total += path.stat().st_size
        return total
