"""End to end: a sample data root, ingested, passes the gate; the same root with one
violation of each invariant planted in its *files* fails it with exactly those rows."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from warehouse.quality.runner import run_checks

RUN = "20260720_041422_27b_m4hr24ku6"  # rounds 6-7 with summaries, timing steps 6-7
CACTUS, DOGS = "aerial-cactus-identification", "dogs-vs-cats-redux-kernels-edition"
EN, RU = "text-normalization-challenge-english-language", "text-normalization-challenge-russian-language"


@pytest.fixture(scope="module")
def sample_root(tmp_path_factory) -> Path:
    from ingest.sample import write_sample_root

    return Path(write_sample_root(tmp_path_factory.mktemp("root") / "root", seed=0))


def ingest(root: Path, db: Path) -> str:
    from ingest.pipeline import ingest_roots
    from warehouse.migrate import init_db

    url = f"duckdb:///{db}"
    init_db(url)
    ingest_roots(url, [root])
    return url


def node_file(root: Path, rnd: int, task: str) -> Path:
    (path,) = [p for p in (root / RUN / f"round_{rnd}").glob(f"{task}__*.jsonl")
               if "__summary_" not in p.name]
    return path


def summary_file(root: Path, rnd: int, task: str) -> Path:
    (path,) = (root / RUN / f"round_{rnd}").glob(f"{task}__summary_*.json")
    return path


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_records(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def untouchable_ids(root: Path) -> set[str]:
    """Ids some record names as parent, or some summary names as best: changing such a
    record would (rightly) break invariants 3 or 8 too."""
    ids = set()
    for path in root.rglob("*.jsonl"):
        if path.name != "timing.jsonl" and path.stat().st_size:
            ids |= {r.get("parent_id") for r in read_records(path)}
    for path in root.rglob("*__summary_*.json"):
        ids.add(json.loads(path.read_text()).get("best_node_id"))
    return ids


def edit_first(path: Path, where, change) -> str:
    """Apply `change` to the first record matching `where`; its id."""
    records = read_records(path)
    record = next(r for r in records if where(r))
    change(record)
    write_records(path, records)
    return record["id"]


def plant_one_of_each(root: Path) -> list[tuple]:
    """One violation of each invariant 1-9; the (check, run, round, task, node) rows."""
    keep = untouchable_ids(root)
    free = lambda r: r["id"] not in keep  # noqa: E731
    rows = []
    a = edit_first(node_file(root, 6, CACTUS), lambda r: r["status"] == "ok",
                   lambda r: r.update(reward=1.5))
    rows.append((1, RUN, 6, CACTUS, a))
    b = edit_first(node_file(root, 6, DOGS), lambda r: r["mode"] == "improve",
                   lambda r: r.update(mode="draft"))
    rows.append((2, RUN, 6, DOGS, b))
    summary = summary_file(root, 7, EN)
    data = json.loads(summary.read_text())
    summary.write_text(json.dumps({**data, "valid": data["valid"] + 1}))
    rows.append((3, RUN, 7, EN, None))
    c = edit_first(node_file(root, 6, EN), lambda r: len(r["response_logprobs"]) > 1,
                   lambda r: r.update(response_logprobs=r["response_logprobs"][:-1]))
    rows.append((4, RUN, 6, EN, c))
    rows.append(_plant_code_in_no_code(root))
    d = edit_first(node_file(root, 6, RU), lambda r: r.get("source") == "grade" and free(r),
                   lambda r: r.update(test_metric=None, oriented=None))
    rows.append((6, RUN, 6, RU, d))
    timing = root / RUN / "timing.jsonl"
    first = timing.read_text().splitlines()[0]
    timing.write_text(timing.read_text() + first + "\n")  # step 6 again after step 7
    rows.append((7, RUN, json.loads(first)["step"], None, None))
    e = edit_first(node_file(root, 7, CACTUS), lambda r: r.get("parent_id") is not None,
                   lambda r: r.update(parent_id="ffffffffffff"))
    rows.append((8, RUN, 7, CACTUS, e))
    rows += _plant_duplicate_id(root, free)
    return rows


def _plant_code_in_no_code(root: Path) -> tuple:
    for rnd, task in [(r, t) for r in (6, 7) for t in (CACTUS, DOGS, EN, RU)]:
        path = node_file(root, rnd, task)
        if any(r["status"] == "no_code" for r in read_records(path)):
            node = edit_first(path, lambda r: r["status"] == "no_code",
                              lambda r: r.update(code="print('hi')"))
            return (5, RUN, rnd, task, node)
    raise AssertionError(f"the sample root has no no_code node in {RUN}")


def _plant_duplicate_id(root: Path, free) -> list[tuple]:
    """Give a round-7 dogs record the id of a round-6 dogs record: both copies offend."""
    taken = next(r["id"] for r in read_records(node_file(root, 6, DOGS)) if free(r))
    edit_first(node_file(root, 7, DOGS), free, lambda r: r.update(id=taken))
    return [(9, RUN, 6, DOGS, taken), (9, RUN, 7, DOGS, taken)]


def view_rows(url: str) -> list[tuple]:
    from warehouse.db import connect

    with connect(url, read_only=True) as con:
        return sorted(con.execute('SELECT "check_no", "run_id", "round", "task", "node_id" '
                                  'FROM "invariant_violations"').fetchall(), key=repr)


def test_clean_sample_root_passes(sample_root, tmp_path):
    url = ingest(sample_root, tmp_path / "clean.duckdb")
    assert view_rows(url) == []
    report = run_checks(url)
    assert report.success, report.failed


def test_planted_files_fail_with_exactly_their_rows(sample_root, tmp_path):
    root = tmp_path / "dirty"
    shutil.copytree(sample_root, root, symlinks=True)
    expected = plant_one_of_each(root)
    url = ingest(root, tmp_path / "dirty.duckdb")

    assert view_rows(url) == sorted(expected, key=repr)
    report = run_checks(url, examples=None)
    named = {(o.check_no, e["run_id"], e["round"], e["task"], e["node_id"])
             for o in report.failed for e in o.examples}
    assert named == set(expected)
    assert {o.check_no for o in report.failed} == set(range(1, 10))
