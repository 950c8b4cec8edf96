"""Every view's body is a valid BI virtual dataset: Superset runs a dataset's SQL through its
parser, sqlglot (duckdb dialect), and sends DuckDB what sqlglot writes back. Each body here is
parsed and regenerated the same way, wrapped as Superset wraps it, and must answer on DuckDB
with the same rows as the body itself, on a warehouse with rows in every view's inputs (the
sample root, the small warehouse that breaks invariants, and a timing row whose phases_s
object carries a phase the steps table has no column for)."""
from __future__ import annotations

import json
import math

import pytest

from sql import view_body
from tests.sql.conftest import Rows, small_warehouse
from warehouse.db import connect
from warehouse.migrate import view_files

sqlglot = pytest.importorskip("sqlglot", reason="sqlglot is in the dev extra (pip install -e '.[dev]')")
VIEWS = [name for name, _ in view_files()]


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    from ingest.pipeline import build_demo

    root = tmp_path_factory.mktemp("bi")
    url = f"duckdb:///{root / 'wh.duckdb'}"
    build_demo(url, str(root / "sample"), seed=0)
    small_warehouse(url)
    r = Rows(url)
    phases = {"gen": 60.0, "update_actor": 30.0, "a_new_phase": 9.5, "note": "not a number"}
    # run_a's step 1 logged again, later (the shown row): 60 + 30 + 9.5 = total_s only when
    # the phase without a column counts
    r.insert("steps", source_id=990, line_no=1, run_id="run_a", step=1, total_s=99.5, gen_s=60.0,
             update_actor_s=30.0, extra=json.dumps({"phases_s": phases}))
    # two trained nodes of run_b (logprob_mismatch's input): one token apart by 1.5
    for line, trainer in ((1, [-0.5, -2.0]), (2, [-0.25, -0.5])):
        r.insert("nodes", source_id=991, line_no=line, run_id="run_b", round=2, task="cactus", node_id=f"t{line}",
                 n_response_tokens=2)
        r.insert("node_payloads", source_id=991, line_no=line, response_token_ids=[1, 2], response_logprobs=[-0.5, -0.5])
        r.insert("node_train_tokens", source_id=991, line_no=line, run_id="run_b", step=2, advantage=0.5,
                 trainer_logprobs=trainer, ref_logprobs=[-0.5, -0.5], ratios=[1.0, 1.0])
    r.con.close()
    return url


def superset_sql(body: str) -> str:
    """What Superset 6 sends for a virtual dataset: the body as a subquery, through sqlglot."""
    wrapped = f"SELECT * FROM ({body}) AS virtual_table"
    return sqlglot.parse_one(wrapped, read="duckdb").sql(dialect="duckdb")


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("view", VIEWS)
def test_the_body_regenerated_by_sqlglot_answers_the_same_rows(url, view):
    body = view_body(view)
    assert "CREATE" not in body.split("\n", 1)[0]
    with connect(url, read_only=True) as con:
        expected = con.execute(f"SELECT * FROM ({body}) ORDER BY ALL").fetchall()
        through_superset = con.execute(f"SELECT * FROM ({superset_sql(body)}) ORDER BY ALL").fetchall()
        view_rows = con.execute(f'SELECT * FROM "{view}" ORDER BY ALL').fetchall()
    assert same(through_superset, expected) and same(view_rows, expected)


def test_every_view_has_rows_here_so_the_comparison_means_something(url):
    with connect(url, read_only=True) as con:
        empty = [v for v in VIEWS if con.execute(f'SELECT count(*) FROM "{v}"').fetchone()[0] == 0]
    assert empty == ["rm_violations"]  # the sample's reward-model run is clean


def test_an_unknown_phase_in_phases_s_counts_in_the_phase_sum(url):
    query = superset_sql(view_body("round_metrics"))
    with connect(url, read_only=True) as con:
        row = con.execute(f'SELECT "total_s", "gen_s", "phase_sum_gap", "timing_rows" FROM ({query}) '
                          """WHERE "run_id" = 'run_a' AND "round" = 1""").fetchall()
    assert row == [(99.5, 60.0, 0.0, 2)]


def test_view_sql_prints_the_body_to_paste():
    from click.testing import CliRunner

    from warehouse.cli import main

    result = CliRunner().invoke(main, ["view-sql", "run_caps"])
    assert result.exit_code == 0 and result.output == view_body("run_caps")
    assert result.output.startswith("SELECT") and "CREATE" not in result.output
    unknown = CliRunner().invoke(main, ["view-sql", "nope"])
    assert unknown.exit_code == 1 and unknown.output.startswith("Error: no view 'nope' in sql/; the views: ")
