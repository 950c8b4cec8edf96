"""The sample root is in the documented shapes and passes every docs/metrics.md invariant.

The checks here re-read the files with plain `json`, independently of the ingest code.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

from ingest.manifest import load_shipped
from ingest.sample import KEYS, write_sample_root

OK_STATUSES = {"ok", "crashed", "timeout", "no_code", "no_submission", "invalid_submission"}


def _node_files(root: Path):
    for path in sorted(root.glob("*/round_*/*.jsonl")):
        yield path, [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def _caps() -> dict[str, int | None]:
    from warehouse.arms import get_arm

    out = {}
    for run_id, entry in load_shipped().items():
        out[run_id] = get_arm(entry["arm"]).response_cap if entry.get("arm") else None
    return out


def test_sample_is_deterministic(tmp_path, sample_root):
    a = sample_root
    b = write_sample_root(tmp_path / "b", seed=0)
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files_a == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for rel in files_a:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    other = write_sample_root(tmp_path / "c", seed=1)
    assert (other / "FILES.txt").read_text() != (a / "FILES.txt").read_text()


def test_sample_shapes(sample_root):
    counts = {p.relative_to(sample_root).as_posix(): len(recs)
              for p, recs in _node_files(sample_root)}
    per_run = Counter(k.split("/")[0] for k in counts)
    assert per_run["20260719_045416_27b_mix4_hr"] == 12
    hr3 = {k.split("/")[2].split("__")[0]: v for k, v in counts.items()
           if k.startswith("20260719_045416_27b_mix4_hr/round_3/")}
    assert hr3 == {"aerial-cactus-identification": 7, "dogs-vs-cats-redux-kernels-edition": 16,
                   "text-normalization-challenge-english-language": 14,
                   "text-normalization-challenge-russian-language": 16}
    hr24k = sorted(v for k, v in counts.items() if k.startswith("20260720_020550_27b_m4hr24k/"))
    assert hr24k == [0, 4, 10, 12]
    assert (sample_root / "20260719_160958_27b_m4hr16k").is_symlink()
    assert not (sample_root / "20260719_160958_27b_m4hr16k").exists()
    stub = list((sample_root / "20260701_231713" / "round_3").iterdir())
    assert len(stub) == 1 and stub[0].stat().st_size == 0
    assert sorted(p.name for p in (sample_root / "20260720_160605_27b_m4hr24ku6b").iterdir())[0] \
        == "round_11"
    assert not (sample_root / "20260702_221522" / "timing.jsonl").exists()
    cactus_timing = (sample_root / "20260702_152844" / "timing.jsonl").read_text().splitlines()
    history = (sample_root / "wandb_exports/tree_grpo_9b_cactus_gpu/history.jsonl").read_text()
    assert len(history.splitlines()) < len(cactus_timing)
    phases = [set(json.loads(l)["phases_s"]) for l in cactus_timing]
    assert "save_checkpoint" not in phases[0] and "save_checkpoint" in phases[1]


def test_sample_schemas(sample_root):
    kinds = defaultdict(set)
    for path, recs in _node_files(sample_root):
        for rec in recs:
            kinds[path.parts[-3]].add(tuple(rec))
    assert kinds["20260701_231713"] == {KEYS["A"]}
    assert kinds["20260702_152844"] == {KEYS["B"]}
    assert kinds["20260719_045416_27b_mix4_hr"] == {KEYS["C"]}
    assert (len(KEYS["A"]), len(KEYS["B"]), len(KEYS["C"])) == (25, 32, 48)


def test_sample_passes_every_node_invariant(sample_root):
    caps = _caps()
    ids = defaultdict(Counter)
    statuses = Counter()
    for path, recs in _node_files(sample_root):
        run = path.parts[-3]
        for r in recs:
            statuses[r["status"]] += 1
            ids[run][r["id"]] += 1
            assert r["status"] in OK_STATUSES and r["mode"] in {"draft", "improve", "debug"}
            assert (r["mode"] == "draft") == (r["parent_id"] is None)
            idle = r["exc_type"] in ("CpuIdleError", "GpuIdleError")
            if r["status"] == "ok":
                assert 0 <= r["reward"] <= 1
            else:
                assert r["reward"] in (-0.5, -0.2, -1.0)
                assert (r["reward"] == -0.2) == idle
            assert len(r["response_token_ids"]) == len(r["response_logprobs"])
            if caps.get(run):
                assert len(r["response_token_ids"]) <= caps[run]
            if r["status"] == "no_code":
                assert r["code"] == ""
                if caps.get(run):
                    assert len(r["response_token_ids"]) == caps[run]
            assert (r["source"] == "grade") == (r["test_metric"] is not None)
            if r["test_metric"] is not None:
                assert abs(r["oriented"]) == r["test_metric"]
            else:
                assert r["oriented"] is None
    assert set(statuses) == OK_STATUSES
    assert all(c == 1 for counter in ids.values() for c in counter.values())
    assert any(r == -1.0 for _, recs in _node_files(sample_root) for r in
               (x["reward"] for x in recs))


def test_sample_parents_are_in_the_lineage(sample_root):
    shipped = load_shipped()
    seen: dict[str, set] = defaultdict(set)
    for path, recs in _node_files(sample_root):
        for r in recs:
            seen[path.parts[-3]].add(r["id"])

    def lineage(run):
        out = set()
        while run:
            out |= seen[run]
            run = (shipped.get(run, {}).get("resumed_from") or {}).get("run")
        return out

    for path, recs in _node_files(sample_root):
        known = lineage(path.parts[-3])
        for r in recs:
            assert r["parent_id"] is None or r["parent_id"] in known, (path, r["id"])


def test_sample_summaries_match_records(sample_root):
    checked = 0
    for summary_path in sample_root.glob("*/round_*/*__summary_*.json"):
        summary = json.loads(summary_path.read_text())
        task = summary_path.name.split("__")[0]
        node_file = next(summary_path.parent.glob(f"{task}__[0-9]*[0-9].jsonl"))
        recs = [json.loads(l) for l in node_file.read_text().splitlines()]
        assert summary["nodes"] == len(recs)
        assert summary["valid"] == sum(r["status"] == "ok" for r in recs)
        by_id = {r["id"]: r for r in recs}
        if summary["best_node_id"] is not None:
            assert summary["best_test_metric"] == by_id[summary["best_node_id"]]["test_metric"]
        checked += 1
    assert checked > 30


def test_sample_timing_is_consistent(sample_root):
    for path in sample_root.glob("*/timing.jsonl"):
        rows = [json.loads(l) for l in path.read_text().splitlines()]
        steps = [r["step"] for r in rows]
        assert steps == sorted(set(steps))
        for r in rows:
            gap = abs(sum(r["phases_s"].values()) - r["total_s"])
            assert gap <= max(1.0, 0.01 * r["total_s"])


def test_sample_has_groups_with_and_without_spread_and_ties(sample_root):
    spreads, ties = Counter(), 0
    for _, recs in _node_files(sample_root):
        groups = defaultdict(list)
        for r in recs:
            groups[r["sibling_group"]].append(r)
        for members in groups.values():
            spreads[len({m["reward"] for m in members}) > 1] += 1
        oriented = [r["oriented"] for r in recs if r["status"] == "ok"]
        ties += len(oriented) != len(set(oriented))
    assert spreads[True] > 0 and spreads[False] > 0 and ties > 0


def test_bench_root_with_a_length_mix_gives_each_response_its_own_length(tmp_path):
    """write_bench_root(lengths=(SHORTEST, CAP)): every response from SHORTEST to CAP tokens,
    its ids and logprobs of one length, a tenth or so exactly at CAP, the rest spread over the
    range (log-uniform: about as many under sqrt(SHORTEST * CAP) as over); the same seed, the
    same root. Without it a file's nodes share one length."""
    from ingest.sample import write_bench_root

    def lengths(root) -> list[list[int]]:
        files = []
        for path in sorted(root.rglob("*__*.jsonl")):
            records = [json.loads(line) for line in path.read_text().splitlines()]
            assert all(len(r["response_token_ids"]) == len(r["response_logprobs"]) for r in records)
            files.append([len(r["response_token_ids"]) for r in records])
        return files

    mixed = lengths(write_bench_root(tmp_path / "a", target_mb=8, lengths=(300, 4096)))
    every = [n for f in mixed for n in f]
    assert len(every) > 200 and min(every) >= 300 and max(every) == 4096
    assert 0.05 < every.count(4096) / len(every) < 0.2
    below = sum(n < (300 * 4096) ** 0.5 for n in every) / len(every)
    assert 0.35 < below < 0.55 and min(every) < 400
    assert lengths(write_bench_root(tmp_path / "b", target_mb=8, lengths=(300, 4096))) == mixed
    fixed = lengths(write_bench_root(tmp_path / "c", target_mb=8, file_mb=0.5))
    assert all(len(set(f)) == 1 for f in fixed)
