"""`warehouse report RUN --out DIR`: a self-contained page with one dashboard PNG per task."""
from __future__ import annotations

import re
from datetime import datetime

import pytest
from click.testing import CliRunner

from tests.sql.conftest import Rows, small_warehouse
from warehouse.cli import main
from warehouse.config import db_path_from_url


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    from warehouse.migrate import init_db

    url = f"duckdb:///{tmp_path_factory.mktemp('report') / 'wh.duckdb'}"
    init_db(url)
    small_warehouse(url)
    rows = Rows(url)  # run_a's trainer recorded its life: the report's header shows it
    rows.insert("run_lifecycle", run_id="run_a", trainer="train run", started_at=datetime(2026, 1, 2, 3, 4, 5),
                heartbeat_at=datetime(2026, 1, 2, 5, 0, 0), ended_at=datetime(2026, 1, 2, 5, 6, 7),
                end_status="stopped", exit_reason="KeyboardInterrupt")
    rows.con.close()
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


def test_report_header_shows_the_runs_state_and_whose_clock_its_last_activity_is(db, report_dir):
    from warehouse.query import run_query

    state = run_query(f"duckdb:///{db}", 'SELECT "state", "last_activity_from" FROM "run_state" '
                                         'WHERE "run_id" = ?', ["run_a"]).rows
    assert state == [("stopped", "trainer")]
    page = (report_dir / "index.html").read_text()
    header = page.split("<h1>Run run_a</h1>")[1].split("<h2>")[0]
    assert header.strip() == (
        "<p id='run-life'>state <b class='state state-stopped'>stopped</b>; started 2026-01-02 03:04:05 UTC; "
        "ended 2026-01-02 05:06:07 UTC (KeyboardInterrupt); last activity 2026-01-02 05:06:07 UTC, "
        "from its trainer&#x27;s record (last heartbeat, end or committed round).</p>")
    metrics = page.split("<h2>Run metrics</h2>")[1].split("</table>")[0]
    assert "<th>state</th>" in metrics and "<td>stopped</td>" in metrics  # run_metrics' own column
