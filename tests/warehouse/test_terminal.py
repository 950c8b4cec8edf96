"""`warehouse metrics` at a terminal: key columns that fit 80 columns, --columns, --all, a
run's run_metrics as a key/value list; CSV and JSON keep every column."""
from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from tests.sql.conftest import small_warehouse
from warehouse.cli import main
from warehouse.config import db_path_from_url
from warehouse.terminal import DEFAULT_COLUMNS, header


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    from warehouse.migrate import init_db

    url = f"duckdb:///{tmp_path_factory.mktemp('terminal') / 'wh.duckdb'}"
    init_db(url)
    small_warehouse(url)
    return db_path_from_url(url)


def invoke(db, *args, width=80):
    result = CliRunner(env={"COLUMNS": str(width)}).invoke(main, ["--db", db, "metrics", *args])
    assert result.exit_code == 0, result.output
    return result.output


def header_fragments(output: str, names) -> list[str]:
    """Header tokens (the lines above each table's rule) that are not made of whole words of
    the column names, i.e. names cut mid-word ('valid_ra', 'te')."""
    words = {w for name in names for w in name.split("_")}
    lines, bad = output.splitlines(), []
    for i, line in enumerate(lines):
        if set(line.strip()) == {"─"}:
            j = i - 1
            while j >= 0 and not lines[j].startswith("run ") and lines[j].strip():
                bad += [t for t in lines[j].split() if not set(filter(None, t.split("_"))) <= words]
                j -= 1
    return bad


@pytest.mark.parametrize("view", list(DEFAULT_COLUMNS))
def test_every_view_fits_80_columns_with_whole_header_words(db, view):
    output = invoke(db, "--view", view)
    assert max(map(len, output.splitlines())) <= 80, output
    shown = DEFAULT_COLUMNS[view]
    assert header_fragments(output, shown) == [], output
    assert "─" in output or "(0 rows)" in output

def test_default_table_is_one_table_per_run_with_key_columns(db):
    output = invoke(db)
    assert "run run_a" in output and "run run_b" in output
    assert "crash_rate" not in output  # not a key column
    assert "(6 rows)" in output
    # a value sits whole on its row: run_b, round 2, dogs: valid_reward_mean (0.2 + 0.4) / 2
    row = next(line for line in output.split("run run_b")[1].splitlines() if "dogs" in line)
    assert row.split()[:4] == ["2", "dogs", "4", "0.5"] and "0.3" in row.split()


def test_header_breaks_only_after_underscores():
    assert header("groups_with_signal_rate") == "groups_with_\nsignal_rate"
    assert header("valid_reward_mean") == "valid_reward_\nmean"
    assert header("nodes") == "nodes"
    assert header("phase_share_save_checkpoint", 12) == "phase_share_\nsave_\ncheckpoint"


def test_columns_picks_and_orders_and_all_shows_every_column(db):
    picked = invoke(db, "--columns", "task,round,crash_rate")
    assert "crash_rate" in picked and "valid_rate" not in picked
    first = next(line for line in picked.splitlines() if "cactus" in line)
    assert first.split() == ["cactus", "1", "0.5"]
    from warehouse.metrics import metrics

    every = metrics(f"duckdb:///{db}", "task_round_metrics").columns
    everything = invoke(db, "--all", width=400)
    assert header_fragments(everything, every) == [] and "crash_rate" in everything.split()
    run_a = everything.split("run run_b")[0].splitlines()
    assert len([line for line in run_a if line.split()[:2] == ["1", "cactus"]]) == 1


def test_unknown_column_is_one_clear_error(db):
    result = CliRunner().invoke(main, ["--db", db, "metrics", "--columns", "round,nope"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: --columns: no column 'nope' in this view; it has: run_id, round")
    both = CliRunner().invoke(main, ["--db", db, "metrics", "--columns", "round", "--all"])
    assert both.exit_code == 2 and "exclude each other" in both.output


def test_csv_and_json_keep_every_column(db):
    from warehouse.metrics import metrics

    every = metrics(f"duckdb:///{db}", "task_round_metrics").columns
    rows = list(csv.DictReader(io.StringIO(invoke(db, "--format", "csv"))))
    assert list(rows[0]) == every
    assert list(json.loads(invoke(db, "--format", "json"))[0]) == every
    assert list(json.loads(invoke(db, "--format", "json", "--columns", "round,task"))[0]) == ["round", "task"]


def test_one_runs_run_metrics_is_a_key_value_list(db):
    from warehouse.metrics import metrics

    output = invoke(db, "--view", "run_metrics", "--run", "run_b")
    expected = metrics(f"duckdb:///{db}", "run_metrics", run="run_b")
    pairs = dict(line.split(None, 1) for line in output.splitlines() if line.strip())
    assert list(pairs) == expected.columns  # every column, one line each, in the view's order
    values = dict(zip(expected.columns, expected.rows[0]))
    assert pairs["run_id"] == "run_b" and int(pairs["nodes"]) == values["nodes"] == 8
    assert pairs["resumed_from_run"] == "run_a"
    assert max(map(len, output.splitlines())) <= 80


def test_run_metrics_keeps_every_key_column_at_80_columns_in_bands(tmp_path):
    """The runs table's columns (state, model, cap, rewards, loss, last activity) too wide for
    80 columns print in bands, each led by the run id: no column is left out, no line is
    wider than the terminal, a long run id is cut in the middle keeping its tail, and each
    run's values are run_metrics' (state from run_state)."""
    from datetime import datetime

    from tests.sql.conftest import Rows
    from warehouse.formatting import format_value
    from warehouse.metrics import metrics
    from warehouse.migrate import init_db

    url = f"duckdb:///{tmp_path / 'wh.duckdb'}"
    init_db(url)
    small_warehouse(url)
    long_id = "claude__ultrafeedback_bt_rm_rewardbench__claude-sonnet-5__xhigh"
    rows = Rows(url)
    rows.run(long_id, kind="reward_model")
    rows.insert("run_lifecycle", run_id="run_b", trainer="train run", started_at=datetime(2026, 1, 1),
                ended_at=datetime(2026, 1, 1, 2), end_status="failed", exit_reason="RuntimeError: boom")
    rows.con.close()
    db = db_path_from_url(url)
    want = metrics(url, "run_metrics")
    for width in (80, 120, 300):
        output = invoke(db, "--view", "run_metrics", width=width)
        lines = output.splitlines()
        assert max(map(len, lines)) <= width
        rules = [i for i, line in enumerate(lines) if set(line.strip()) == {"─"}]
        assert (len(rules) > 1) == (width < 300), output  # bands only where one table cannot fit
        # each run's lines, band after band, read as run_metrics' values of every key column
        per_run: dict[str, list[str]] = {}
        for k, rule in enumerate(rules):
            for line in lines[rule + 1:]:
                if not line.strip() or line.startswith("("):
                    break
                run, *values = line.split()
                per_run.setdefault(run, []).extend(values)
        key = DEFAULT_COLUMNS["run_metrics"]
        for row in want.rows:
            values = dict(zip(want.columns, row))
            if values["run_id"] == long_id:
                continue
            expected = " ".join(format_value(values[c]) for c in key[1:]).split()
            assert per_run[values["run_id"]] == expected, output
        shown = next(r for r in per_run if r not in ("run_a", "run_b"))
        assert shown == long_id if width == 300 else ("…" in shown and long_id.endswith(shown.split("…")[1]))
        assert ("bands of columns" in lines[-1]) == (len(rules) > 1)
    assert header_fragments(invoke(db, "--view", "run_metrics"), DEFAULT_COLUMNS["run_metrics"]) == []


# --- text stays text: markup and control characters in values print as written ---------------

HOSTILE_TEXT = ["[/x]", "[bold red]loud[/bold red]", "\x1b[31mred\x1b[0m", "\x1b]0;title\x07", "a\nb\rc",
                "\u202eevil"]


def _sql(db, query, width=200):
    return CliRunner(env={"COLUMNS": str(width)}).invoke(main, ["--db", db, "sql", query])


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_a_value_is_printed_as_text_never_obeyed(db, text):
    literal = "'" + text.replace("'", "''") + "'"
    for query in (f"SELECT {literal} AS v, 1 AS n", f"SELECT 1 AS {chr(34)}{text}{chr(34)}",
                  f"SELECT {literal} AS v, 1 AS n UNION ALL SELECT 'x', 2"):
        result = _sql(db, query)
        assert result.exit_code == 0, result.output
        assert not any(c in result.output for c in "\x1b\x07\r\u202e"), repr(result.output)
    shown = _sql(db, f"SELECT {literal} AS v").output
    if text.isprintable():
        assert text in shown  # the brackets as written, not styling
    else:
        assert "\\x1b" in shown or "\\n" in shown or "\\u202e" in shown, shown


def test_a_run_id_and_a_vertical_value_are_text(tmp_path):
    from warehouse.query import Result
    from warehouse.terminal import render_for_terminal

    vertical = render_for_terminal(Result(["run_id", "state"], [("[bold]r\x1b[2J", "[/x]")]), width=80)
    assert "[bold]r\\x1b[2J" in vertical and "[/x]" in vertical and "\x1b" not in vertical
    per_run = render_for_terminal(Result(["run_id", "round"], [("[/x]\x1b", 1), ("[/x]\x1b", 2)]), width=80)
    assert "[/x]" in per_run and "x1b" in per_run and "\x1b" not in per_run  # the title wraps to the table


def test_an_error_prints_its_control_characters_escaped(db):
    result = _sql(db, "SELECT * FROM \"no\x1b[2Jtable\"")
    assert result.exit_code != 0 and "\x1b" not in result.output and "\\x1b[2J" in result.output, result.output


def test_long_tables_print_the_same_lines_past_rich(monkeypatch):
    """Past PLAIN_ROWS_AFTER rows a table's body is written as plain lines, not laid out by
    rich: the same text, character for character, as rich prints it, for random tables of
    text, integers, floats and NULLs, cut, banded or with left-out columns (the "…" column),
    one table per run, at several widths; a non-ASCII cell leaves every row to rich."""
    import random

    import warehouse.terminal as terminal
    from warehouse.query import Result

    rng = random.Random(7)
    word = lambda: "".join(rng.choice("abcdefghij_-.0123456789 ") for _ in range(rng.randint(0, 40)))  # noqa: E731
    names = ("run_id", "a", "groups_with_signal_rate", "node_id", "x_y_z_w", "detail")
    checked = 0
    for _ in range(40):
        types = [rng.choice(["VARCHAR", "INTEGER", "DOUBLE"]) for _ in range(rng.randint(1, 9))]
        columns = [rng.choice(names) + str(i) for i in range(len(types))]
        if rng.random() < 0.3:
            columns[0] = "run_id"  # a table per run
        values = {"VARCHAR": word, "INTEGER": lambda: rng.randint(-10**6, 10**9),
                  "DOUBLE": lambda: rng.random() * 10 ** rng.randint(-3, 6)}
        rows = [tuple(None if rng.random() < 0.1 else values[t]() for t in types)
                for _ in range(rng.randint(terminal.PLAIN_ROWS_AFTER + 1, 180))]
        if columns[0] == "run_id":
            rows = [(rng.choice(["r1", "r2"]), *row[1:]) for row in rows]
        result, width = Result(columns, rows, types), rng.choice([40, 80, 200])
        texts = {}
        for plain_after in (terminal.PLAIN_ROWS_AFTER, 10**9):
            monkeypatch.setattr(terminal, "PLAIN_ROWS_AFTER", plain_after)
            texts[plain_after] = (terminal.table_text(result, width),
                                  terminal.render_for_terminal(result, width, banded=False))
        monkeypatch.undo()
        assert texts[terminal.PLAIN_ROWS_AFTER] == texts[10**9], (columns, width)
        checked += "…" in texts[10**9][1]
    assert checked > 5  # tables with left-out columns among them
    wide = Result(["name", "n"], [("ü" * 5, 1)] * 150 + [("日本語", 2)], ["VARCHAR", "INTEGER"])
    printed = terminal.table_text(wide, 80)
    monkeypatch.setattr(terminal, "PLAIN_ROWS_AFTER", 10**9)
    assert printed == terminal.table_text(wide, 80)
