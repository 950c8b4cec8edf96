"""Every terminal table at 80 columns (`sql`, `tables`, `check`, `metrics`), as the DuckDB CLI
prints them: no line wider than the terminal, long cells cut with an ellipsis, numbers
right-aligned with one precision per column, NULL and booleans written one way, columns that
cannot fit left out and counted."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from tests.sql.conftest import small_warehouse
from warehouse.cli import main
from warehouse.config import db_path_from_url
from warehouse.formatting import format_column, format_value
from warehouse.query import Result
from warehouse.terminal import table_text

LONG = "a note that goes on " * 10  # 200 characters


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    from warehouse.migrate import init_db

    url = f"duckdb:///{tmp_path_factory.mktemp('fit') / 'wh.duckdb'}"
    init_db(url)
    small_warehouse(url)
    return db_path_from_url(url)


def cli(db, *args, width=80, code=0):
    result = CliRunner(env={"COLUMNS": str(width)}).invoke(main, ["--db", db, *args])
    assert result.exit_code == code, result.output
    return result.output


def lines_of(output: str) -> list[str]:
    return output.splitlines()


def test_sql_at_80_columns_cuts_a_long_cell_and_right_aligns_numbers(db):
    query = (f"SELECT * FROM (VALUES ('{LONG}', 12345, 0.5::DOUBLE, NULL::INTEGER, true), "
             "('short', 7, 0.25::DOUBLE, NULL::INTEGER, false)) t(note, n, x, nothing, flag)")
    output = cli(db, "sql", query)
    lines = lines_of(output)
    assert max(map(len, lines)) <= 80, output
    first, second = lines[2], lines[3]
    assert first.startswith("a note that goes") and "…" in first and LONG not in output  # cut in the middle
    assert second.startswith("short ")
    # n, x and the all-NULL integer column end where their headers end
    for name, top, bottom in (("n", "12345", "7"), ("x", "0.50", "0.25"), ("nothing", "NULL", "NULL")):
        end = re.search(rf"\b{name}\b", lines[0]).end()
        assert first[:end].endswith(top) and second[:end].endswith(bottom), (name, output)
    assert first.split()[-1] == "true" and second.split()[-1] == "false"  # SQL's words, not Python's
    assert lines[-1] == "(2 rows)"


def test_sql_keeps_whole_cells_when_the_terminal_is_wide_enough(db):
    output = cli(db, "sql", "SELECT run_id, arm, resumed_from_run FROM runs ORDER BY run_id", width=200)
    assert "…" not in output
    assert [line.split() for line in lines_of(output)[2:4]] == [["run_a", "hr_b", "NULL"],
                                                                ["run_b", "hr24k_u6", "run_a"]]


def test_columns_that_cannot_fit_side_by_side_are_printed_in_bands_every_one_kept(db):
    names = [f"column_{i:02d}" for i in range(30)]
    query = "SELECT " + ", ".join(f"'value of {n}' AS {n}" for n in names)
    output = cli(db, "sql", query)
    lines = lines_of(output)
    assert max(map(len, lines)) <= 80, output
    headers = [line.split() for line in lines if line.startswith("column_00")]
    assert len(headers) >= 2 and all(len(h) >= 2 for h in headers), output  # each band led by column_00
    assert sorted({name for h in headers for name in h}) == names, output  # every column, none cut out
    assert lines[-1] == f"(1 row; {len(headers)} bands of columns, each led by column_00)"


def test_a_run_id_is_whole_while_the_other_columns_can_give_room(db):
    run_id = "20260719_160958_27b_m4hr16k_with_a_long_suffix"
    output = cli(db, "sql", f"SELECT '{run_id}' AS run_id, '{LONG}' AS notes, '{LONG}' AS more")
    assert run_id in output and max(map(len, lines_of(output))) <= 80


def test_the_demos_suggested_query_keeps_all_four_columns_at_80(db):
    output = cli(db, "sql", "SELECT run_id, kind, arm, lost FROM runs")
    lines = lines_of(output)
    assert max(map(len, lines)) <= 80, output
    assert lines[0].split() == ["run_id", "kind", "arm", "lost"] and lines[-1] == "(2 rows)"


def test_long_names_are_cut_in_the_middle_and_stay_different(db):
    ids = [f"20261201_021530_12345{i}_3f9a0{i}_hr24k_u6_with_a_long_tail" for i in range(2)]
    tasks = ["text-normalization-challenge-english-language", "text-normalization-challenge-russian-language"]
    rows = ", ".join(f"('{r}', '{t}', '{LONG}')" for r, t in zip(ids, tasks))
    output = cli(db, "sql", f"SELECT * FROM (VALUES {rows}) t(run_id, task, notes)")
    lines = lines_of(output)
    assert max(map(len, lines)) <= 80 and lines[0].split() == ["run_id", "task", "notes"], output
    cut = [line.split()[:2] for line in lines[2:4]]
    assert all("…" in cell for pair in cut for cell in pair), output  # even the ids: all columns kept
    assert cut[0][0] != cut[1][0] and cut[0][1] != cut[1][1], output  # ... and still told apart
    for (run, task), full_id, full_task in zip(cut, ids, tasks):  # each cut keeps its value's ends
        for shown, full in ((run, full_id), (task, full_task)):
            head, tail = shown.split("…")
            assert full.startswith(head) and full.endswith(tail) and len(tail) >= len(head)


def test_cut_middle_keeps_the_tail():
    from warehouse.terminal import cut_middle, distinct_width

    assert cut_middle("20261201_021530_123456_3f9a0c_hr24k_u6", 16) == "20261…c_hr24k_u6"
    assert cut_middle("short", 16) == "short" and len(cut_middle("x" * 40, 7)) == 7
    assert distinct_width(["run_a_tail", "run_b_tail"], 4) == 9  # 'ru…a_tail' / 'ru…b_tail' differ


def test_tables_at_80_columns(db):
    output = cli(db, "tables")
    lines = lines_of(output)
    assert max(map(len, lines)) <= 80, output
    assert lines[0].split() == ["name", "kind", "rows"]
    body = {line.split()[0]: line for line in lines[2:-1]}
    # row counts right-aligned under their header: every count ends where "rows" ends
    end = lines[0].index("rows") + len("rows")
    assert {len(line.rstrip()) for line in body.values()} == {end}
    assert body["nodes"].split()[-1] == "24" and body["round_metrics"].split()[1] == "view"


def test_check_at_80_columns_cuts_long_expectations(db):
    output = cli(db, "check", code=1)  # the small warehouse breaks invariants on purpose
    lines = lines_of(output)
    table = lines[:lines.index(next(line for line in lines if line.startswith(("PASSED", "FAILED"))))]
    assert max(map(len, table)) <= 80, output
    assert table[0].split()[:3] == ["check", "suite", "expectation"]
    assert any("…" in line for line in table[2:])  # some expectation is longer than its column
    checks = [line[:5] for line in table[2:-1]]
    assert all(c.strip().isdigit() and c == c.strip().rjust(5) for c in checks)  # right-aligned


def test_metrics_at_80_columns_right_aligns_with_one_precision(db):
    output = cli(db, "metrics", "--view", "round_metrics")
    lines = lines_of(output)
    assert max(map(len, lines)) <= 80, output
    rows = [line for line in lines if line.strip()[:1].isdigit()]
    per_node = [line.split()[-1] for line in rows]  # run_a rounds 1, 2 then run_b's round 2
    assert per_node == format_column([101.0 / 8, 102.0 / 8])[:2] + format_column([102.0 / 8])
    assert len({len(line) for line in rows}) == 1  # every row ends at the same column


def test_format_column_shares_one_precision_and_null_is_one_word():
    assert format_column([0.5, 0.3333333, 12.5, None]) == ["0.50", "0.33", "12.50", "NULL"]
    assert format_column([0.5, 0.3]) == ["0.5", "0.3"]
    assert format_column([1.0, 2.0]) == ["1.0", "2.0"]
    assert format_column([0.0004, 0.0001]) == ["4.000e-04", "1.000e-04"]
    assert format_column([True, None, 3]) == ["true", "NULL", "3"]
    assert format_value(None) == "NULL"
    assert format_value(float("nan")) == "NaN"


def test_a_table_without_types_aligns_by_value():
    text = table_text(Result(["name", "n"], [("a", 1), ("b", 100)]), width=80)
    lines = lines_of(text)
    assert lines[2].endswith("  1") and lines[3].endswith("100")


def test_a_hint_command_fits_80_columns_without_breaking_a_word():
    from warehouse.terminal import fit_command

    words = ["warehouse", "--db", "/home/someone/experiments/2026-12/seed_sweep/" + "w" * 12 + ".duckdb",
             "metrics", "--run", "20261201_021530_123456_3f9a0c_hr24k_u6"]
    text = fit_command(words, width=80)
    lines = text.splitlines()
    assert len(lines) > 1 and max(map(len, lines)) <= 80, text
    assert all(line.endswith(" \\") for line in lines[:-1])  # one command to copy
    assert " ".join(line.removesuffix(" \\").strip() for line in lines).split(" ") == words
    assert fit_command("warehouse --db wh.duckdb metrics", width=80) == "warehouse --db wh.duckdb metrics"


def test_a_library_warning_is_one_warning_line_once(capsys):
    import warnings

    from warehouse.terminal import one_line_warnings

    with warnings.catch_warnings():  # restores Python's own printer afterwards
        warnings.simplefilter("always")
        one_line_warnings()
        for _ in range(2):
            warnings.warn("`is_gradient_checkpointing` is deprecated.\nUse the other one.", FutureWarning)
    assert capsys.readouterr().err == "Warning: `is_gradient_checkpointing` is deprecated. (FutureWarning)\n"
