"""Every file in sql/ is applied by init, and every view answers on an empty warehouse."""
from __future__ import annotations

from pathlib import Path

import pytest

import sql as sql_package
from warehouse.db import connect

SQL_DIR = Path(sql_package.__file__).parent
VIEW_FILES = sorted(p.stem for p in SQL_DIR.glob("*.sql"))
REPORT_VIEWS = ["task_round_metrics", "round_metrics", "run_metrics", "run_status_counts",
                "decision_rule"]


def test_every_sql_file_is_a_view_in_the_warehouse(db_url):
    with connect(db_url, read_only=True) as con:
        views = {r[0] for r in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert set(VIEW_FILES) <= views
    assert set(REPORT_VIEWS) <= set(VIEW_FILES)


@pytest.mark.parametrize("view", VIEW_FILES)
def test_view_answers_on_an_empty_warehouse(db_url, view):
    with connect(db_url, read_only=True) as con:
        assert con.execute(f'SELECT count(*) FROM "{view}"').fetchone() == (0,)


@pytest.mark.parametrize("view", VIEW_FILES)
def test_view_file_states_its_grain_and_is_named_after_its_view(view):
    text = (SQL_DIR / f"{view}.sql").read_text()
    assert text.startswith(f"-- {view}: one row per"), text[:80]
    assert f'CREATE OR REPLACE VIEW "{view}" AS' in text


def test_init_twice_reapplies_the_views(db_url):
    from warehouse.migrate import init_db

    init_db(db_url)
    with connect(db_url, read_only=True) as con:
        n = con.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchone()[0]
    assert n >= len(VIEW_FILES)


def test_every_view_is_in_the_catalog_of_docs_bi():
    catalog = (SQL_DIR.parent / "docs" / "bi.md").read_text()
    assert [v for v in VIEW_FILES if f"| `{v}`" not in catalog] == []
