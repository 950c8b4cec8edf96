"""Tiny warehouses built row by row, for the NULL, tie and lineage cases of the metric views."""
from __future__ import annotations

import itertools

import pytest


class Rows:
    """Insert rows straight into a fresh warehouse (no ingest), then query the views."""

    def __init__(self, url: str):
        import duckdb

        from warehouse.config import db_path_from_url

        self.con = duckdb.connect(db_path_from_url(url))
        self._source_ids = {}
        self._next_source = itertools.count(1)
        self._lines = {}

    def insert(self, table: str, **row) -> None:
        cols = ", ".join(f'"{c}"' for c in row)
        marks = ", ".join("?" for _ in row)
        self.con.execute(f'INSERT INTO "{table}" ({cols}) VALUES ({marks})', list(row.values()))

    def run(self, run_id: str, arm: str | None = None, resumed_from: str | None = None,
            resumed_step: int | None = None, kind: str = "training",
            overrides: str | None = None) -> None:
        self.insert("runs", run_id=run_id, arm=arm, kind=kind, lost=False,
                    resumed_from_run=resumed_from, resumed_from_step=resumed_step,
                    overrides=overrides)

    def task_round(self, run_id: str, rnd: int, task: str, summary: bool = True,
                   node_file: bool = True, **fields) -> None:
        self.insert("task_rounds", run_id=run_id, round=rnd, task=task, summary_present=summary,
                    node_file_present=node_file, has_tree=node_file, has_transcript=node_file,
                    **fields)

    def node(self, run_id: str, rnd: int, task: str, node_id: str, **fields) -> None:
        key = (run_id, rnd, task)
        source = self._source_ids.setdefault(key, next(self._next_source))
        line = self._lines[key] = self._lines.get(key, 0) + 1
        self.insert("nodes", source_id=source, line_no=line, run_id=run_id, round=rnd, task=task,
                    node_id=node_id, **fields)

    def step(self, run_id: str, step: int, total_s: float, line_no: int, **phases) -> None:
        source = self._source_ids.setdefault((run_id, "timing"), next(self._next_source))
        self.insert("steps", source_id=source, line_no=line_no,
                    run_id=run_id, step=step, total_s=total_s, **phases)

    def query(self, sql: str, *params) -> list[dict]:
        cur = self.con.execute(sql, list(params))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def one(self, sql: str, *params) -> dict:
        rows = self.query(sql, *params)
        assert len(rows) == 1, rows
        return rows[0]


@pytest.fixture
def rows(db_url):
    r = Rows(db_url)
    yield r
    r.con.close()


def small_warehouse(url: str) -> None:
    """Two runs (the second resumed from the first), two tasks, timing rows: for CLI tests."""
    r = Rows(url)
    r.run("run_a", arm="hr_b")
    r.run("run_b", arm="hr24k_u6", resumed_from="run_a", resumed_step=1)
    for run_id, rnd in (("run_a", 1), ("run_a", 2), ("run_b", 2)):
        for task in ("cactus", "dogs"):
            r.task_round(run_id, rnd, task, gen_llm_seconds=5.0, gen_exec_seconds=2.0)
            for i in range(4):
                ok = i % 2 == 0
                r.node(run_id, rnd, task, f"{run_id}-{rnd}-{task}-{i}", mode="draft",
                       status="ok" if ok else "crashed", reward=0.1 * (i + rnd) if ok else -0.5,
                       sibling_group=f"g{rnd}", n_response_tokens=1000 * (i + 1),
                       oriented=0.5 + i, test_metric=0.5 + i)
        r.step(run_id, rnd, 100.0 + rnd, line_no=rnd, update_weights_s=1.0, gen_s=60.0,
               old_log_prob_s=5.0, ref_s=5.0, adv_s=1.0, update_actor_s=28.0)
    r.con.close()
