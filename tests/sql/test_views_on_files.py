"""Acceptance: every metric view equals a plain-Python recomputation from the root's files.

The root is the ingest sample (both seed styles, every edge case of docs/data-roots.md) plus the
hand-made runs of tests/sql/cases (ties in `oriented`, task-rounds with no ok node, a summary without
records, an empty stub jsonl, a duplicated timing step, an unknown arm's NULL cap, a resumed
run whose parents live in the run it resumed from). `oracle.py` parses the files itself; the
warehouse side goes through ingest (`ingest_roots`, what `warehouse ingest` calls).
"""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from tests.sql import oracle

CASES = Path(__file__).parent / "cases"
TOL = 1e-9


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(warehouse URL, expected rows by view from the files) for the sample root + cases."""
    from ingest.manifest import load_manifests
    from ingest.pipeline import ingest_roots
    from ingest.sample import write_sample_root
    from warehouse.arms import ARMS
    from warehouse.migrate import init_db

    base = tmp_path_factory.mktemp("views")
    root = write_sample_root(base / "root", seed=0)
    for case in (p for p in CASES.iterdir() if p.is_dir()):
        shutil.copytree(case, root / case.name)
    db = base / "wh.duckdb"
    init_db(f"duckdb:///{db}")
    manifest_file = CASES / "cases_manifest.toml"
    report = ingest_roots(f"duckdb:///{db}", [str(root)], [str(manifest_file)])
    assert (report.rows_rejected, report.files_failed, report.errors) == (0, 0, [])
    manifest = load_manifests([manifest_file])
    cap_of_arm = {a.name: a.response_cap for a in ARMS}
    files = oracle.read_root(root)
    caps = {run: cap_of_arm.get((manifest.get(run) or {}).get("arm")) for run in files.runs}
    trm = oracle.task_round_metrics(files, caps)
    expected = {
        "task_round_metrics": trm,
        "round_metrics": oracle.round_metrics(files, trm),
        "run_metrics": oracle.run_metrics(files, trm, manifest),
        "run_status_counts": oracle.run_status_counts(files),
        "decision_rule": oracle.decision_rule(files, trm, manifest),
    }
    return f"duckdb:///{db}", expected


KEYS = {"task_round_metrics": ("run_id", "round", "task"), "round_metrics": ("run_id", "round"),
        "run_metrics": ("run_id",), "run_status_counts": ("run_id", "status"),
        "decision_rule": ("run_id", "task", "k")}


def view_rows(url: str, view: str) -> dict:
    from warehouse.metrics import metrics

    result = metrics(url, view=view)
    keys = KEYS[view]
    rows = [dict(zip(result.columns, row)) for row in result.rows]
    out = {tuple(r[k] for k in keys): r for r in rows}
    assert len(out) == len(rows), f"{view}: duplicate keys"
    return {k[0] if len(k) == 1 else k: v for k, v in out.items()}


def same(got, want) -> bool:
    if want is None or got is None:
        return got is None and want is None
    if isinstance(want, str) or isinstance(got, str):
        return got == want
    if isinstance(want, bool) or isinstance(got, bool):
        return bool(got) == bool(want) and int(got) == int(want)
    return math.isclose(float(got), float(want), rel_tol=0, abs_tol=TOL)


def mismatches(view: str, got: dict, want: dict) -> list[str]:
    out = []
    for key, expected in want.items():
        if key not in got:
            out.append(f"{view} {key}: row missing")
            continue
        for column, value in expected.items():
            if not same(got[key][column], value):
                out.append(f"{view} {key} {column}: view {got[key][column]!r} != files {value!r}")
    return out


@pytest.mark.parametrize("view", list(KEYS))
def test_view_equals_the_recomputation_from_files(built, view):
    url, expected = built
    got = view_rows(url, view)
    assert mismatches(view, got, expected[view]) == []
    extra = set(got) - set(expected[view])
    if view in ("run_metrics", "round_metrics"):  # lost runs, empty round dirs: no records
        assert all(got[k]["nodes"] == 0 for k in extra), extra
    else:
        assert extra == set()


def test_the_cases_exercise_nulls_and_ties(built):
    """Guard against a vacuous pass: the hand-made cases really produce these values."""
    _, expected = built
    trm = expected["task_round_metrics"]
    assert trm[("case_ties_and_nulls", 1, "tie-task")]["best_test_metric_recount"] == 0.80
    assert trm[("case_ties_and_nulls", 1, "tie-task")]["resp_clip_rate"] is None
    assert trm[("case_ties_and_nulls", 1, "no-ok-task")]["valid_reward_mean"] is None
    assert trm[("case_ties_and_nulls", 1, "summary-only-task")]["nodes"] == 0
    assert trm[("case_ties_and_nulls", 2, "no-ok-task")]["valid_rate"] is None
    assert trm[("case_capped_resumed", 3, "tie-task")]["resp_clip_rate"] == 3 / 4
    assert trm[("case_capped_resumed", 3, "tie-task")]["clipped_at_cap"] == 2
    runs = expected["run_metrics"]
    assert runs["case_capped_resumed"]["improve_keeps_valid"] == 1 / 3
    assert runs["case_capped_resumed"]["debug_fixes_parent"] == 1.0
    assert runs["case_capped_resumed"]["root_run_id"] == "case_ties_and_nulls"
    assert expected["round_metrics"][("case_ties_and_nulls", 1)]["timing_rows"] == 2
    assert expected["round_metrics"][("case_ties_and_nulls", 1)]["total_s"] == 110.0
    rule = expected["decision_rule"][("case_capped_resumed", "tie-task", 3)]
    assert rule["delta"] == pytest.approx((0.4 + 0.2) / 2 - 0.6) and rule["moved"] is False


def test_seed_figures_read_off_with_one_query_each(built):
    """The figures the seeds quote, one query each (the queries docs/bi.md shows)."""
    from warehouse.query import run_query

    url, expected = built
    counts = run_query(url, 'SELECT "status", sum("n") FROM "run_status_counts" '
                            'WHERE "run_id" LIKE \'2026070%\' GROUP BY 1 ORDER BY 1').rows
    want = {}
    for (run, status), v in expected["run_status_counts"].items():
        if run.startswith("2026070"):
            want[status] = want.get(status, 0) + v["n"]
    assert dict(counts) == want
    spread = run_query(url, 'SELECT "round", "tasks_with_spread" FROM "round_metrics" '
                            'WHERE "run_id" = ? AND "step" IS NOT NULL ORDER BY 1',
                       ["20260719_045416_27b_mix4_hr"]).rows
    assert spread == [(k[1], v["tasks_with_spread"]) for k, v in
                      sorted(expected["round_metrics"].items())
                      if k[0] == "20260719_045416_27b_mix4_hr" and v["step"] is not None]
    moved = run_query(url, 'SELECT count(*) FILTER (WHERE "moved") FROM "decision_rule" '
                           'WHERE "run_id" = ? AND "k" = 3', ["20260719_045416_27b_mix4_hr"]).rows
    assert moved == [(sum(bool(v["moved"]) for k, v in expected["decision_rule"].items()
                          if k[0] == "20260719_045416_27b_mix4_hr" and k[2] == 3),)]


def docs_queries() -> list[str]:
    """The SQL block of docs/bi.md's data-root figures section, split into statements."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "bi.md").read_text()
    section = text[text.index("## The published data roots' figures"):]
    start = section.index("```sql") + len("```sql")
    block = section[start:section.index("```", start)]
    return [q.strip() for q in block.split(";") if q.strip()]


def test_docs_seed_queries_answer_what_the_files_say(built):
    from ingest.manifest import load_manifests
    from warehouse.query import run_query

    url, expected = built
    queries = docs_queries()
    assert len(queries) == 4
    results = [run_query(url, q).rows for q in queries]
    question = {run: e.get("question_id") for run, e in load_manifests().items()}
    want = {}
    for (run, status), v in expected["run_status_counts"].items():
        if question.get(run) == "02-9b-capability-ceiling":
            want[status] = want.get(status, 0) + v["n"]
    assert dict(results[0]) == want
    spread = {(run, k): v["tasks_with_spread"] for (run, k), v in expected["round_metrics"].items()
              if v["step"] is not None}
    assert {(r[0], r[1]): r[3] for r in results[1]} == spread
    assert all(len(rows) > 0 for rows in results[1:2] + results[3:])
