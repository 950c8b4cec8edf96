"""`warehouse check` through click's CliRunner: exit codes, table, JSON, Data Docs."""
from __future__ import annotations

import json
import re

from click.testing import CliRunner

from tests.warehouse.quality.conftest import plant
from warehouse.cli import main


def invoke(url: str, *args: str, width: int = 200):
    return CliRunner(env={"COLUMNS": str(width)}).invoke(main, ["--db", url, "check", *args])


def test_clean_warehouse_exits_0_and_says_passed(clean_url):
    result = invoke(clean_url)
    assert result.exit_code == 0, result.output
    assert "PASSED: all 37 expectations hold." in result.output
    assert "FAIL" not in result.output


def test_violation_exits_1_with_count_and_examples(clean_url):
    plant(clean_url, "UPDATE nodes SET parent_id = 'nope' WHERE node_id IN ('a5', 'c1')")
    result = invoke(clean_url)
    assert result.exit_code == 1, result.output
    (line,) = [ln for ln in result.output.splitlines() if "  FAIL  " in ln]
    cells = re.split(r"\s{2,}", line.strip())  # columns are two or more spaces apart
    assert cells[0] == "8" and cells[1] == "lineage" and cells[4] == "2"
    assert cells[5] == "r1 round 2 cactus a5; r2 round 3 cactus c1"
    assert "FAILED: 1 of 37 expectations (invariants 8)" in result.output


def test_json_lists_every_expectation_with_its_rows(clean_url):
    plant(clean_url, "UPDATE nodes SET code_chars = 3 WHERE node_id = 'b2'")
    result = invoke(clean_url, "--format", "json", "--suite", "nodes")
    assert result.exit_code == 1
    doc = json.loads(result.output)
    assert doc["success"] is False
    assert {e["check_no"] for e in doc["expectations"]} == {1, 2, 4, 5, 6, 9}
    (failed,) = [e for e in doc["expectations"] if not e["success"]]
    assert failed["check_no"] == 5 and failed["unexpected_count"] == 1
    assert failed["examples"] == [{"run_id": "r1", "round": 1, "task": "textnorm", "node_id": "b2"}]


def test_run_option_limits_the_gate_to_one_run(clean_url):
    plant(clean_url, "UPDATE nodes SET reward = 7 WHERE node_id = 'a1'")
    assert invoke(clean_url, "--run", "p0").exit_code == 0
    assert invoke(clean_url, "--run", "r1", "--suite", "nodes").exit_code == 1


def test_unknown_run_is_one_error_line(clean_url):
    result = invoke(clean_url, "--run", "no_such_run")
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: no run 'no_such_run' in the warehouse. List runs with "
        "'warehouse sql \"SELECT run_id FROM runs\"'."]


def test_docs_writes_data_docs_html(clean_url, tmp_path):
    plant(clean_url, "UPDATE task_rounds SET valid = 0 WHERE run_id = 'p0'")
    docs = tmp_path / "docs"
    result = invoke(clean_url, "--suite", "summaries", "--docs", str(docs))
    assert result.exit_code == 1
    index = docs / "index.html"
    assert f"Data Docs: {index}" in result.output
    pages = list((docs / "validations").rglob("*.html"))
    assert len(pages) == 1
    assert "expect_column_values_to_not_be_in_set" in pages[0].read_text() or \
        "check_no" in pages[0].read_text()
    assert "summaries" in index.read_text()
