"""A small clean warehouse, built row by row, and the planted-violation cases.

The clean warehouse exercises every edge the invariants allow: an idle kill at -0.2, an
infrastructure failure at -1.0, a no_code node at exactly the arm's cap, a lower-is-better
metric (oriented = -test_metric), a resumed run whose parent lives in the run it resumed
from, a probe with no arm (no cap), a phase gap inside 1 s and one inside 1% of total_s,
and a task with no records and no summary.

Each file in cases/ plants violations into that warehouse: SQL statements plus
`-- expect: CHECK RUN ROUND TASK NODE` lines naming the rows the gate must report ("-" is
NULL), or `-- expect: none`.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CASES_DIR = Path(__file__).parent / "cases"

RUNS = [
    dict(run_id="r1", arm="hr24k_u6", kind="training", lost=False),
    dict(run_id="r2", arm="hr24k_u6b", kind="training", lost=False,
         resumed_from_run="r1", resumed_from_step=1),
    dict(run_id="p0", arm=None, kind="probe", lost=False),
]

# (source_id, run, round, task) of each node file, then its records in line order.
CAP = 24576  # hr24k_u6 / hr24k_u6b response cap
NODE_FILES = {
    (1, "r1", 1, "cactus"): [
        dict(node_id="a1", mode="draft", status="ok", reward=0.6, source="grade",
             test_metric=0.9, oriented=0.9, tokens=100, code_chars=50),
        dict(node_id="a2", mode="draft", status="crashed", reward=-0.5, exc_type="NameError",
             source="none", tokens=120, code_chars=30),
        dict(node_id="a3", mode="draft", status="crashed", reward=-0.2, exc_type="CpuIdleError",
             tokens=CAP, code_chars=40),
        dict(node_id="a4", mode="draft", status="timeout", reward=-1.0, exc_type="TimeoutError",
             tokens=90, code_chars=10),
    ],
    (2, "r1", 1, "textnorm"): [
        dict(node_id="b1", mode="draft", status="ok", reward=0.3, source="grade",
             test_metric=0.12, oriented=-0.12, tokens=80, code_chars=70),
        dict(node_id="b2", mode="draft", status="no_code", reward=-0.5, tokens=CAP, code_chars=0),
    ],
    (3, "r1", 2, "cactus"): [
        dict(node_id="a5", mode="improve", parent_id="a1", status="ok", reward=0.8,
             source="grade", test_metric=0.95, oriented=0.95, tokens=60, code_chars=55),
        dict(node_id="a6", mode="debug", parent_id="a2", status="invalid_submission",
             reward=-0.5, tokens=70, code_chars=35),
        dict(node_id="a7", mode="improve", parent_id="a1", status="crashed", reward=-0.2,
             exc_type="GpuIdleError", tokens=65, code_chars=33),
    ],
    (7, "r2", 3, "cactus"): [
        dict(node_id="c1", mode="improve", parent_id="a5", status="ok", reward=0.9,
             source="grade", test_metric=0.97, oriented=0.97, tokens=50, code_chars=44),
        dict(node_id="c2", mode="draft", status="no_submission", reward=-0.5, tokens=40,
             code_chars=20),
    ],
    (8, "p0", 0, "denoise"): [
        dict(node_id="d1", mode="draft", status="crashed", reward=-0.5, exc_type="ValueError",
             tokens=50000, code_chars=10),
        dict(node_id="d2", mode="draft", status="ok", reward=1.0, source="grade",
             test_metric=0.05, oriented=-0.05, tokens=900, code_chars=99),
    ],
}

# (source_id, run, round, task, nodes, valid, best_node_id, best_test_metric)
SUMMARIES = [
    (4, "r1", 1, "cactus", 4, 1, "a1", 0.9),
    (5, "r1", 1, "textnorm", 2, 1, "b1", 0.12),
    (6, "r1", 2, "cactus", 3, 1, "a5", 0.95),
    (10, "p0", 0, "denoise", 2, 1, "d2", 0.05),
]
# task-rounds without a summary: a partial round, and a task with no records at all
NO_SUMMARY = [("r1", 2, "textnorm", None), ("r2", 3, "cactus", 7)]

PHASES = ("update_weights_s", "gen_s", "old_log_prob_s", "ref_s", "adv_s", "update_actor_s",
          "save_checkpoint_s")
# timing.jsonl of r1 (source 9): gap 0; gap 0.5 (< 1 s); gap 9 of total 1000 (< 1%)
STEPS = [
    dict(step=1, total_s=100.0, phases=(5, 60, 10, 10, 1, 14, None)),
    dict(step=2, total_s=200.0, phases=(10, 120, 20, 20, 1, 18.5, 10)),
    dict(step=3, total_s=1000.0, phases=(50, 600, 100, 100, 1, 140, None)),
]


def _insert(con, table: str, row: dict) -> None:
    cols = ", ".join(f'"{c}"' for c in row)
    marks = ", ".join("?" for _ in row)
    con.execute(f'INSERT INTO "{table}" ({cols}) VALUES ({marks})', list(row.values()))


def _source(con, source_id, kind, run, rnd=None, task=None, name="") -> None:
    path = f"/root/{run}/" + (f"round_{rnd}/{task}__{name}" if rnd is not None else name)
    _insert(con, "sources", dict(source_id=source_id, path=path, kind=kind, run_id=run,
                                 round=rnd, task=task))


def _node_row(source_id, line_no, run, rnd, task, record: dict) -> dict:
    record = dict(record)
    tokens = record.pop("tokens")
    return dict(source_id=source_id, line_no=line_no, run_id=run, round=rnd, task=task,
                n_response_tokens=tokens, n_response_logprobs=tokens, exp_id=task,
                sibling_group=f"{run}-{rnd}-{task}", **record)


def _fill(con) -> None:
    for run in RUNS:
        _insert(con, "runs", run)
    for (source_id, run, rnd, task), records in NODE_FILES.items():
        _source(con, source_id, "nodes", run, rnd, task, "1784437355.jsonl")
        for line_no, record in enumerate(records, start=1):
            _insert(con, "nodes", _node_row(source_id, line_no, run, rnd, task, record))
    for source_id, run, rnd, task, n, valid, best_id, best in SUMMARIES:
        _source(con, source_id, "summary", run, rnd, task, "summary_1784437355.json")
        _insert(con, "task_rounds", dict(
            run_id=run, round=rnd, task=task, summary_present=True, node_file_present=True,
            has_tree=True, has_transcript=True, summary_source_id=source_id, nodes=n,
            valid=valid, best_node_id=best_id, best_test_metric=best))
    for run, rnd, task, node_source in NO_SUMMARY:
        _insert(con, "task_rounds", dict(
            run_id=run, round=rnd, task=task, summary_present=False,
            node_file_present=node_source is not None, has_tree=False, has_transcript=False,
            node_source_id=node_source))
    _source(con, 9, "timing", "r1", name="timing.jsonl")
    for line_no, step in enumerate(STEPS, start=1):
        _insert(con, "steps", dict(source_id=9, line_no=line_no, run_id="r1", step=step["step"],
                                   total_s=step["total_s"], **dict(zip(PHASES, step["phases"]))))


def build_clean(url: str) -> None:
    """Fill a freshly migrated warehouse at `url` with the clean rows above."""
    from warehouse.db import connect

    with connect(url) as con:
        _fill(con)


def parse_case(path: Path) -> tuple[str, list[tuple]]:
    """(SQL to run, expected (check, run, round, task, node) rows) of one case file."""
    expected = []
    for line in path.read_text().splitlines():
        if line.startswith("-- expect:"):
            fields = line.split(":", 1)[1].split()
            if fields == ["none"]:
                continue
            check, run, rnd, task, node = [None if f == "-" else f for f in fields]
            expected.append((int(check), run, int(rnd), task, node))
    return path.read_text(), sorted(expected, key=repr)


def case_files() -> list[Path]:
    return sorted(CASES_DIR.glob("*.sql"))


@pytest.fixture(scope="session")
def clean_template(template_db, tmp_path_factory) -> Path:
    """The clean warehouse, filled once per session (a copy of the migrated template)."""
    path = tmp_path_factory.mktemp("quality") / "clean.duckdb"
    shutil.copyfile(template_db, path)
    build_clean(f"duckdb:///{path}")
    return path


@pytest.fixture
def clean_url(clean_template, tmp_path) -> str:
    """A private copy of the clean warehouse (copying beats migrating for every test)."""
    path = tmp_path / "wh.duckdb"
    shutil.copyfile(clean_template, path)
    return f"duckdb:///{path}"


def plant(url: str, sql: str) -> None:
    from warehouse.db import connect

    with connect(url) as con:
        con.execute(sql)
