"""`warehouse report` of a trainer run: KL (with the coefficient in force), entropy, learning
rate and valid rate per step, as a figure and a table."""
from __future__ import annotations

import re

from click.testing import CliRunner

from tests.sql.conftest import small_warehouse
from ingest.records import load_step_metrics
from train.learn.store import step_metrics_record
from warehouse.cli import main
from warehouse.config import db_path_from_url
from warehouse.db import connect


def test_a_run_with_steps_gets_the_training_figure_and_table(tmp_path):
    from warehouse.migrate import init_db

    url = f"duckdb:///{tmp_path / 'wh.duckdb'}"
    init_db(url)
    small_warehouse(url)
    with connect(url) as con:
        for step, (kl, coef, lr) in enumerate([(0.01, 0.001, 1.5e-3), (0.02, 0.0012, 3e-3)], start=1):
            record = step_metrics_record(step, {"kl": kl, "entropy": 1.0 / step, "lr": lr, "loss": 0.1,
                                                "clip_frac": 0.0, "kl_coef": coef})
            load_step_metrics(con, "run_a", [record], source_path=f"train://run_a/round_{step}/step_metrics")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["--db", db_path_from_url(url), "report", "run_a", "--out", str(out)])
    assert result.exit_code == 0, result.output
    page = (out / "index.html").read_text()
    assert "training_steps.png" in re.findall(r"<img src='([^']+)'", page)
    assert (out / "training_steps.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = page[page.index("id='training'"):]
    # kl_coef from extra, the step's lr; one precision per column (warehouse.formatting)
    assert "<td>0.0010</td>" in table and "<td>0.0012</td>" in table  # kl_coef 0.001 as 0.0010
    assert "<td>0.0015</td>" in table and "<td>0.0030</td>" in table  # lr 1.5e-3, 3e-3


def test_a_run_without_steps_has_no_training_section(tmp_path):
    from warehouse.migrate import init_db

    url = f"duckdb:///{tmp_path / 'wh.duckdb'}"
    init_db(url)
    small_warehouse(url)
    out = tmp_path / "out"
    assert CliRunner().invoke(main, ["--db", db_path_from_url(url), "report", "run_a", "--out", str(out)]).exit_code == 0
    page = (out / "index.html").read_text()
    assert "id='training'" not in page and "training_steps.png" not in page
