"""Ingest of the sample root: counts match an independent recount; incremental; atomic."""
from __future__ import annotations

import json
import shutil
from collections import Counter, defaultdict

import pytest

from ingest import load
from ingest.pipeline import ingest_roots
from tests.ingest.helpers import make_db, rows, table_dump

TABLES = ("runs", "rounds", "task_rounds", "sibling_groups", "nodes", "node_payloads", "steps",
          "sources", "ingest_errors", "wandb_runs", "wandb_history")


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory, sample_root):
    url = make_db(tmp_path_factory.mktemp("wh"))
    report = ingest_roots(url, [sample_root])
    return url, report


def _recount(root):
    nodes, groups, task_rounds = Counter(), defaultdict(Counter), set()
    for path in root.glob("*/round_*/*.jsonl"):
        run, rnd, task = path.parts[-3], int(path.parts[-2][6:]), path.name.split("__")[0]
        task_rounds.add((run, rnd, task))
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            nodes[(run, rnd, task)] += 1
            groups[(run, rnd, task)][rec["sibling_group"]] += 1
    for path in root.glob("*/round_*/*__summary_*.json"):
        task_rounds.add((path.parts[-3], int(path.parts[-2][6:]), path.name.split("__")[0]))
    return nodes, groups, task_rounds


def test_counts_match_an_independent_recount(warehouse, sample_root):
    url, report = warehouse
    nodes, groups, task_rounds = _recount(sample_root)
    got = dict(((r, n, t), c) for r, n, t, c in rows(
        url, "SELECT run_id, round, task, count(*) FROM nodes GROUP BY ALL"))
    assert got == {k: v for k, v in nodes.items() if v}
    assert set(rows(url, "SELECT run_id, round, task FROM task_rounds")) == task_rounds
    got_groups = defaultdict(Counter)
    for run, rnd, task, group, size in rows(
            url, "SELECT run_id, round, task, sibling_group, size FROM sibling_groups"):
        got_groups[(run, rnd, task)][group] = size
    assert got_groups == {k: v for k, v in groups.items() if v}
    assert report.rows_rejected == 0 and report.exit_code == 0
    assert rows(url, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_every_round_directory_is_a_rounds_row(warehouse, sample_root):
    url, _ = warehouse
    expected = {(p.parent.name, int(p.name[6:]), str(p)) for p in sample_root.glob("*/round_*")}
    assert set(rows(url, "SELECT run_id, round, source_path FROM rounds")) == expected


def test_summaries_and_timing_land_verbatim(warehouse, sample_root):
    url, _ = warehouse
    got = {r[:3]: r[3:] for r in rows(
        url, "SELECT run_id, round, task, nodes, valid, best_node_id, best_test_metric, "
             "gen_llm_seconds FROM task_rounds WHERE summary_present")}
    expected = {}
    for path in sample_root.glob("*/round_*/*__summary_*.json"):
        summary = json.loads(path.read_text())
        expected[(path.parts[-3], int(path.parts[-2][6:]), path.name.split("__")[0])] = (
            summary["nodes"], summary["valid"], summary["best_node_id"],
            summary["best_test_metric"], summary["gen_llm_seconds"])
    assert got == expected
    expected = []
    for path in sample_root.glob("*/timing.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            expected.append((path.parts[-2], row["step"], row["total_s"],
                             row["phases_s"].get("save_checkpoint")))
    assert sorted(rows(url, "SELECT run_id, step, total_s, save_checkpoint_s FROM steps")) == \
        sorted(expected)


def test_derived_node_columns(warehouse, sample_root):
    url, _ = warehouse
    path = next(sample_root.glob("20260702_152844/round_1/*__[0-9]*[0-9].jsonl"))
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    got = rows(url, "SELECT node_id, schema_kind, n_response_tokens, n_response_logprobs, "
                    "code_chars, resources_gpu, exec_exec_s FROM nodes WHERE source_id = "
                    "(SELECT source_id FROM sources WHERE path = ?) ORDER BY line_no", [str(path)])
    assert got == [(r["id"], "B", len(r["response_token_ids"]), len(r["response_logprobs"]),
                    len(r["code"]), (r["resources"] or {}).get("gpu"),
                    (r["exec_timings"] or {}).get("exec")) for r in recs]


def test_expansion_steps(warehouse):
    url, _ = warehouse
    # 002: the records' step; 000: order of first appearance (one group per task-round)
    assert rows(url, "SELECT DISTINCT expansion_step FROM sibling_groups WHERE run_id = "
                     "'20260701_231713' AND round = 1 ORDER BY 1") == [(0,), (1,), (2,), (3,)]
    assert rows(url, "SELECT DISTINCT expansion_step FROM sibling_groups WHERE run_id = "
                     "'20260719_045416_27b_mix4_hr'") == [(0,)]
    drafts = rows(url, "SELECT count(*) FROM sibling_groups WHERE run_id = '20260701_231713' "
                       "AND expansion_step < 2 AND parent_id IS NOT NULL")
    assert drafts == [(0,)]


def test_runs_from_manifests(warehouse):
    url, _ = warehouse
    runs = {r[0]: r[1:] for r in rows(
        url, "SELECT run_id, arm, kind, wandb_run, resumed_from_run, resumed_from_step, lost "
             "FROM runs")}
    assert runs["20260719_160958_27b_m4hr16k"] == (
        "hr16k", "training", "tree_grpo_27b_mix4_hr16k", "20260719_045416_27b_mix4_hr", 5, True)
    assert runs["20260720_160605_27b_m4hr24ku6b"][3:5] == ("20260720_041422_27b_m4hr24ku6", 10)
    assert runs["20260719_045416_27b_mix4_hr"][:3] == ("hr_b", "training",
                                                       "tree_grpo_27b_mix4_hr_b")
    assert runs["smoke_hr_textnorm"][:2] == (None, "smoke")
    assert runs["20260701_223600"][:2] == (None, "stress")
    assert "20260719_221809_27b_m4hr32k" not in runs  # in the manifest, not on disk, not lost


def test_reingest_is_a_no_op(warehouse, sample_root):
    url, _ = warehouse
    before = {t: table_dump(url, t) for t in TABLES}
    again = ingest_roots(url, [sample_root])
    assert again.files_loaded == 0 and again.files_skipped == again.files_total
    assert {t: table_dump(url, t) for t in TABLES} == before


def test_changed_file_replaces_its_rows(small_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(small_root, root, symlinks=True)
    url = make_db(tmp_path)
    ingest_roots(url, [root])
    path = next(root.glob("20260702_020809/round_1/*__[0-9]*[0-9].jsonl"))
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:20]) + "\n")
    report = ingest_roots(url, [root])
    assert report.files_loaded == 1
    assert rows(url, "SELECT count(*), max(line_no) FROM nodes WHERE run_id = '20260702_020809' "
                     "AND round = 1") == [(20, 20)]
    assert rows(url, "SELECT count(*) FROM node_payloads p JOIN sources s USING (source_id) "
                     "WHERE s.path = ?", [str(path)]) == [(20,)]
    assert rows(url, "SELECT sum(size) FROM sibling_groups WHERE run_id = '20260702_020809' "
                     "AND round = 1") == [(20,)]
    assert rows(url, "SELECT count(*) FROM sources WHERE path = ?", [str(path)]) == [(1,)]


def test_a_file_that_fails_midway_is_fully_out_and_the_next_run_completes(
        small_root, tmp_path, monkeypatch):
    url = make_db(tmp_path)
    real = load.derive_nodes
    order: dict = {}

    def flaky(con, sources, staged, round_paths):
        real(con, sources, staged, round_paths)  # rows are written, then the file fails
        for source in sources.values():
            if order.setdefault(source.path, len(order)) == 2:  # the third file, each time it is tried
                raise RuntimeError("disk full")

    monkeypatch.setattr(load, "derive_nodes", flaky)
    first = ingest_roots(url, [small_root])
    assert first.files_failed == 1 and first.exit_code == 3
    (path,) = [e.split(": could not load")[0] for e in first.errors]
    assert rows(url, "SELECT count(*) FROM nodes n JOIN sources s USING (source_id) "
                     "WHERE s.path = ?", [path]) == [(0,)]
    monkeypatch.setattr(load, "derive_nodes", real)
    second = ingest_roots(url, [small_root])
    assert second.files_loaded == 1 and second.exit_code == 0
    nodes, _, _ = _recount(small_root)
    assert rows(url, "SELECT count(*) FROM nodes") == [(sum(nodes.values()),)]
    assert rows(url, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_ctrl_c_rolls_back_the_open_file(small_root, tmp_path, monkeypatch):
    url = make_db(tmp_path)
    real = load.derive_nodes

    def interrupted(con, sources, staged, round_paths):
        real(con, sources, staged, round_paths)
        raise KeyboardInterrupt

    monkeypatch.setattr(load, "derive_nodes", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ingest_roots(url, [small_root])
    assert rows(url, "SELECT count(*) FROM nodes") == [(0,)]
    monkeypatch.setattr(load, "derive_nodes", real)
    assert ingest_roots(url, [small_root]).exit_code == 0
    nodes, _, _ = _recount(small_root)
    assert rows(url, "SELECT count(*) FROM nodes") == [(sum(nodes.values()),)]


def test_a_failing_file_in_a_batch_lands_as_one_transaction_per_file_would(
        small_root, tmp_path, monkeypatch):
    """Files of a batch share a commit; a file that raises leaves the rest as per-file would."""
    real = load.derive_nodes
    files = sorted(str(p) for p in small_root.glob("*/round_*/*__[0-9]*[0-9].jsonl"))
    failing = {files[0], files[len(files) // 2], files[-1]}

    def broken(con, sources, staged, round_paths):
        real(con, sources, staged, round_paths)
        for source in sources.values():
            if source.path in failing:
                raise RuntimeError(f"broken {source.path}")

    monkeypatch.setattr(load, "derive_nodes", broken)
    dumps, reports = [], []
    for name, batch_bytes in (("batched.duckdb", 64 * 2**20), ("per_file.duckdb", 1)):
        url = make_db(tmp_path, name)
        reports.append(ingest_roots(url, [small_root], batch_bytes=batch_bytes))
        dumps.append({t: table_dump(url, t, drop=("ingested_at", "created_at")) for t in TABLES})
    assert dumps[0] == dumps[1]
    batched, per_file = reports
    assert batched.errors == per_file.errors and batched.files_failed == len(failing)
    assert {e.split(": could not load")[0] for e in batched.errors} == failing
    nodes, _, _ = _recount(small_root)
    landed = sum(n for (run, rnd, task), n in nodes.items()
                 if not any(f"/{run}/round_{rnd}/{task}__" in f for f in failing))
    monkeypatch.setattr(load, "derive_nodes", real)
    url = make_db(tmp_path, "check.duckdb")
    ingest_roots(url, [small_root])  # same root, nothing failing: every node lands
    assert rows(url, "SELECT count(*) FROM nodes") == [(sum(nodes.values()),)]
    assert dumps[0]["nodes"] and len(dumps[0]["nodes"]) == landed
