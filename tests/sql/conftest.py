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
            resumed_step: int | None = None, kind: str = "training") -> None:
        self.insert("runs", run_id=run_id, arm=arm, kind=kind, lost=False,
                    resumed_from_run=resumed_from, resumed_from_step=resumed_step)

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


@pytest.fixture(scope="session")
def template_db(tmp_path_factory):
    """One migrated warehouse per session; tests get copies (init takes about a second)."""
    from warehouse.migrate import init_db

    path = tmp_path_factory.mktemp("template") / "wh.duckdb"
    init_db(f"duckdb:///{path}")
    return path


@pytest.fixture
def db_url(template_db, tmp_path) -> str:
    """A fresh, migrated warehouse file in tmp_path (a copy of the session's template)."""
    import shutil

    target = tmp_path / "wh.duckdb"
    shutil.copyfile(template_db, target)
    return f"duckdb:///{target}"


@pytest.fixture
def rows(db_url):
    r = Rows(db_url)
    yield r
    r.con.close()
