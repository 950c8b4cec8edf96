import json

import pytest

from ingest.records import load_step_metrics
from train.learn.gates import (HealthGateError, check_health_gate, decision_rule, format_decision,
                               parse_steps)
from train.learn.store import step_metrics_record
from warehouse.db import connect
from warehouse.errors import TerminalError

_line = iter(range(1, 10_000))


def _node(con, run_id, round_no, task, status, reward, exc_type=None):
    n = next(_line)
    con.execute('INSERT INTO "nodes" ("source_id", "line_no", "run_id", "round", "task", "node_id", '
                '"status", "reward", "mode", "exc_type") VALUES (1, ?, ?, ?, ?, ?, ?, ?, \'draft\', ?)',
                [n, run_id, round_no, task, f"n{n}", status, reward, exc_type])


def _run(con, run_id, resumed_from=None, step=None):
    con.execute('INSERT INTO "runs" ("run_id", "kind", "lost", "resumed_from_run", "resumed_from_step") '
                "VALUES (?, 'training', FALSE, ?, ?)", [run_id, resumed_from, step])


def test_health_gate_passes_and_fails_from_the_warehouse(db_url):
    with connect(db_url) as con:
        _run(con, "good")
        for task in ("a", "b"):
            _node(con, "good", 1, task, "ok", 0.4)
            _node(con, "good", 1, task, "crashed", -0.5)
        _run(con, "bad")
        _node(con, "bad", 1, "a", "ok", 0.7)
        _node(con, "bad", 1, "b", "crashed", -0.5, "NameError")
        _node(con, "bad", 1, "b", "crashed", -0.5, "MemoryLimitError")
        _node(con, "bad", 1, "b", "timeout", -0.5, "TimeoutError")
        _node(con, "bad", 1, "b", "crashed", -0.5, "NameError")
        _node(con, "bad", 2, "b", "ok", 0.9)  # a later round does not rescue round 1
        assert "2 tasks" in check_health_gate(con, "good")
        # the message says why the task's nodes failed, most common first
        with pytest.raises(HealthGateError, match=r"run bad \(b: 0 ok nodes \(2 crashed NameError, 1 crashed "
                                                  r"MemoryLimitError, 1 timeout TimeoutError\)\).*--no-health-gate"):
            check_health_gate(con, "bad")
        _run(con, "odd")
        _node(con, "odd", 3, "a", "ok", 1.5)
        with pytest.raises(HealthGateError, match="1 ok rewards outside"):
            check_health_gate(con, "odd")
        with pytest.raises(HealthGateError, match="no first round"):
            check_health_gate(con, "missing")


def test_decision_rule_follows_the_lineage_to_the_root(db_url):
    with connect(db_url) as con:
        _run(con, "root")
        _node(con, "root", 1, "a", "ok", 0.2)
        _node(con, "root", 1, "b", "ok", 0.6)
        _run(con, "child", resumed_from="root", step=5)
        _node(con, "child", 9, "a", "ok", 0.5)
        _node(con, "child", 9, "b", "ok", 0.4)
        rows = decision_rule(con, "child", 9)
        assert [(r[0], r[1], r[2], round(r[3], 6), r[4]) for r in rows] == [
            ("a", "root", 1, 0.3, True), ("b", "root", 1, -0.2, False)]
        text = format_decision(rows, "child", 9)
        assert text.startswith("Decision rule at step 9: 1 of 2 tasks moved (valid_reward_mean vs root round 1)")
        assert "a +0.300 moved" in text and "b -0.200" in text
        assert "no round 16" in format_decision(decision_rule(con, "child", 16), "child", 16)


def test_step_metrics_rows_replace_and_keep_extras_and_non_finite_values(db_url):
    def write(metrics, path="train://r/round_1/step_metrics"):
        return load_step_metrics(con, "r", [step_metrics_record(1, metrics)], source_path=path)

    with connect(db_url) as con:
        assert write({"loss": 0.5, "kl": 0.0, "tokens": 100, "ratio_max": 1.0}) == 1
        # another source (a spool loaded later) writing the same step replaces the row too
        write({"loss": 0.25, "kl": 0.01, "tokens": 3_000_000_000, "ratio_max": 1.1}, "spool/r/step_metrics.jsonl")
        rows = con.execute('SELECT "loss", "kl", "tokens", "extra" FROM "step_metrics"').fetchall()
        assert len(rows) == 1 and rows[0][:3] == (0.25, 0.01, 3_000_000_000)
        assert json.loads(rows[0][3]) == {"ratio_max": 1.1}
        write({"loss": float("nan"), "kl": 0.0})  # a diverged step lands; its loss is kept in extra
        rows = con.execute('SELECT "loss", "kl", "extra" FROM "step_metrics"').fetchall()
    assert rows[0][:2] == (None, 0.0) and json.loads(rows[0][2]) == {"loss": "nan"}


def test_decision_steps_parse():
    assert parse_steps("16, 9,30") == (9, 16, 30)
    with pytest.raises(TerminalError, match="e.g. 9,16,30"):
        parse_steps("nine")
