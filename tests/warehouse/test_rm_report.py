"""`warehouse report RUN` for a reward-model run: the score-by-progress plot (proxy and
final, error bars, the reference line) and the section table."""
from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.rm_fixtures import *  # noqa: F403 - fixtures
from tests.rm_fixtures import RM_RUN
from warehouse.cli import main


@pytest.fixture(scope="module")
def report_dir(rm_template, tmp_path_factory):
    out = tmp_path_factory.mktemp("rm_report") / "out"
    result = CliRunner().invoke(main, ["--db", str(rm_template), "report", RM_RUN,
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"Wrote {out / 'index.html'}"
    return out


def test_page_links_the_plot_and_it_is_a_png(report_dir):
    page = (report_dir / "index.html").read_text()
    assert re.findall(r"<img src='([^']+)'", page) == ["scores_by_progress.png"]
    assert (report_dir / "scores_by_progress.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_section_table_has_every_evaluation_and_its_sections(report_dir):
    page = (report_dir / "index.html").read_text()
    table = page.split("<h2>Evaluations and section scores</h2>", 1)[1].split("</table>", 1)[0]
    assert all(f"<th>{s}</th>" in table for s in ("Chat", "Chat Hard", "Safety", "Reasoning"))
    rows = table.split("<tr>")[2:]
    assert len(rows) == 14
    soup = next(r for r in rows if "U-05_soup2_p128_proxy" in r)
    assert "<td>54.56</td>" in soup and "<td>72.2013</td>" in soup
    best = page.split("against the reference</h2>", 1)[1].split("</table>", 1)[0]
    assert "<td>38.325</td>" in best and "<td>74.5689</td>" in best


def test_plot_draws_proxy_and_final_with_error_bars_and_the_reference(rm_template):
    from matplotlib.container import ErrorbarContainer

    from warehouse.rm_report import load_rm_run, score_figure

    data = load_rm_run(f"duckdb:///{rm_template}", RM_RUN)
    fig = score_figure(data)
    exploration, formal = fig.axes
    labels = {ax.get_title().split(":")[0]: [c.get_label() for c in ax.containers
                                              if isinstance(c, ErrorbarContainer)]
              for ax in fig.axes}
    assert labels["formal"] == ["formal (full)", "formal (proxy_rows)"]
    assert "U-05/soup2 (proxy)" in labels["exploration"]
    formal_full = next(c for c in formal.containers if c.get_label() == "formal (full)")
    line, _, (bars,) = formal_full
    assert list(line.get_xdata()) == [2880, 2976, 3072]
    assert list(line.get_ydata()) == [37.3628, 36.9610, 38.3250]
    low_high = [(seg[0][1], seg[1][1]) for seg in bars.get_segments()]  # +/- one SE
    assert low_high[2] == pytest.approx((38.3250 - 0.9680, 38.3250 + 0.9680))
    for ax in (exploration, formal):
        assert any(list(l.get_ydata()) == [74.568936, 74.568936] for l in ax.get_lines())


def test_unknown_run_is_one_error_line(rm_template, tmp_path):
    result = CliRunner().invoke(main, ["--db", str(rm_template), "report", "no_such_run",
                                       "--out", str(tmp_path / "x")])
    assert result.exit_code != 0
    assert "no run 'no_such_run'" in result.output


def test_header_shows_the_state_and_marks_a_last_activity_read_from_file_times(rm_template, report_dir):
    """An imported reward-model run's files carry no time of their own: its last activity is
    their newest mtime, and the header says it is a file time."""
    import duckdb

    con = duckdb.connect(str(rm_template), read_only=True)
    paths = [p for (p,) in con.execute('SELECT "path" FROM "sources" WHERE "run_id" = ?', [RM_RUN]).fetchall()]
    con.close()
    newest = datetime.fromtimestamp(max(Path(p).stat().st_mtime_ns for p in paths) // 10**9, timezone.utc)
    page = (report_dir / "index.html").read_text()
    header = page.split("</h1>")[1].split("<h2>")[0]
    assert "state <b class='state state-imported'>imported</b>" in header
    assert f"last activity {newest:%Y-%m-%d %H:%M:%S} UTC, from its files&#x27; modification time (file time)" in header
