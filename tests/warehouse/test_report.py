"""`warehouse report RUN --out DIR`: a self-contained page with one dashboard PNG per task."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from tests.sql.conftest import small_warehouse
from warehouse.cli import main
from warehouse.config import db_path_from_url


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    from warehouse.migrate import init_db

    url = f"duckdb:///{tmp_path_factory.mktemp('report') / 'wh.duckdb'}"
    init_db(url)
    small_warehouse(url)
    return db_path_from_url(url)


@pytest.fixture(scope="module")
def report_dir(db, tmp_path_factory):
    """The report is drawn once (matplotlib is the slow part) and inspected by each test."""
    out = tmp_path_factory.mktemp("rep") / "out"
    result = CliRunner().invoke(main, ["--db", db, "report", "run_a", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"Wrote {out / 'index.html'}"
    return out


def test_report_writes_index_and_one_png_per_task(report_dir):
    out = report_dir
    page = (out / "index.html").read_text()
    images = re.findall(r"<img src='([^']+)'", page)
    assert sorted(images) == ["dashboard_cactus.png", "dashboard_dogs.png"]
    for name in images:  # every link resolves inside DIR, and is a real PNG
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "http" not in page  # nothing fetched from elsewhere


def test_report_tables_carry_the_view_numbers(db, report_dir):
    from warehouse.config import resolve_db_url
    from warehouse.report import load_run

    data = load_run(resolve_db_url(db), "run_a")
    assert data.tasks == ["cactus", "dogs"] and data.response_cap == 12288
    assert [r["total_s"] for r in data.rounds] == [101.0, 102.0]
    assert len(data.nodes) == 16
    page = (report_dir / "index.html").read_text()
    assert page.count("<td>0.5</td>") >= 4  # valid_rate of every task-round row


def test_report_of_an_unknown_run_is_one_clear_error(db, tmp_path):
    result = CliRunner().invoke(main, ["--db", db, "report", "nope", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.strip() == ("Error: no run 'nope' in the warehouse. List runs with "
                                     "'warehouse metrics --view run_metrics'.")
