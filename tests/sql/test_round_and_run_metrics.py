"""round_metrics, run_metrics, run_status_counts and decision_rule on hand-built rows."""
from __future__ import annotations

import pytest

PHASES = dict(update_weights_s=1.0, gen_s=50.0, old_log_prob_s=2.0, ref_s=2.0, adv_s=0.5,
              update_actor_s=40.0)


@pytest.fixture
def lineage(rows):
    """root (rounds 1-2, timing 1 twice) <- mid (resumed at 1; round 2) <- leaf (round 3)."""
    rows.run("root", arm="hr_b")
    rows.run("mid", arm="hr24k_u6", resumed_from="root", resumed_step=1)
    rows.run("leaf", arm="hr24k_u6b", resumed_from="mid", resumed_step=2)
    for task, rewards in (("a", [0.2, 0.4]), ("b", [0.5, 0.5])):
        rows.task_round("root", 1, task, gen_llm_seconds=10.0, gen_exec_seconds=1.0)
        for i, reward in enumerate(rewards):
            rows.node("root", 1, task, f"{task}{i}", mode="draft", status="ok", reward=reward,
                      sibling_group=f"{task}g", n_response_tokens=10)
    rows.task_round("root", 2, "a", summary=False)
    rows.node("root", 2, "a", "a2", mode="improve", status="crashed", reward=-0.5,
              parent_id="a0", sibling_group="x")
    rows.step("root", 1, 100.0, line_no=1, **PHASES)
    rows.step("root", 1, 120.0, line_no=2, **PHASES)          # step 1 logged twice
    # mid's parents live in root (the run it resumed from)
    rows.node("mid", 2, "a", "m1", mode="improve", status="ok", reward=0.9, parent_id="a1")
    rows.node("mid", 2, "a", "m2", mode="debug", status="ok", reward=0.1, parent_id="a2")
    rows.node("mid", 2, "a", "m3", mode="improve", status="crashed", reward=-0.5, parent_id="a0")
    rows.node("mid", 2, "b", "m4", mode="debug", status="crashed", reward=-0.5, parent_id="m3")
    rows.node("leaf", 3, "a", "l1", mode="improve", status="ok", reward=0.1, parent_id="m1",
              resources_gpu=1.0, schema_kind="B", exc_type="GpuIdleError")
    rows.node("leaf", 3, "a", "l2", mode="draft", status="no_code", reward=-0.5,
              schema_kind="B", decl_malformed=True)
    return rows


def test_round_metrics_counts_tasks_with_records_and_spread(lineage):
    r = lineage.one('SELECT * FROM "round_metrics" WHERE "run_id" = ? AND "round" = 1', "root")
    assert (r["tasks"], r["tasks_with_spread"], r["nodes"], r["fresh_drafts"]) == (2, 1, 4, 4)
    assert r["gen_llm_seconds"] == 20.0 and r["gen_exec_seconds"] == 2.0


def test_round_metrics_takes_the_last_of_duplicate_timing_rows(lineage):
    r = lineage.one('SELECT * FROM "round_metrics" WHERE "run_id" = ? AND "round" = 1', "root")
    assert (r["step"], r["timing_rows"], r["total_s"]) == (1, 2, 120.0)
    assert r["phase_share_gen"] == pytest.approx(50.0 / 120.0)
    assert r["phase_sum_gap"] == pytest.approx(abs(sum(PHASES.values()) - 120.0))
    assert r["per_node_step_s"] == pytest.approx(120.0 / 4)
    assert r["save_checkpoint_s"] is None and r["phase_share_save_checkpoint"] is None


def test_round_without_timing_keeps_its_row_with_null_timing(lineage):
    r = lineage.one('SELECT * FROM "round_metrics" WHERE "run_id" = ? AND "round" = 2', "root")
    assert (r["tasks"], r["tasks_with_spread"], r["fresh_drafts"]) == (1, 0, 0)
    assert r["total_s"] is None and r["per_node_step_s"] is None and r["timing_rows"] == 0
    assert r["gen_llm_seconds"] is None  # no summary in the round


def test_run_metrics_counts_and_steps(lineage):
    r = lineage.one('SELECT * FROM "run_metrics" WHERE "run_id" = ?', "root")
    assert (r["nodes"], r["rounds"], r["steps_logged"], r["steps_missing"]) == (5, 2, 2, 1)
    assert r["gpu_declared_rate"] is None  # no record carries the resources field
    assert (r["root_run_id"], r["lineage_depth"], r["first_round"]) == ("root", 0, 1)
    assert r["health_gate_step1"] is True
    assert r["status_counts"] == '{"crashed": 1, "ok": 4}'


def test_parents_are_followed_into_the_run_resumed_from(lineage):
    mid = lineage.one('SELECT * FROM "run_metrics" WHERE "run_id" = ?', "mid")
    assert mid["improve_keeps_valid"] == pytest.approx(1 / 2)   # m1 ok (a1 ok), m3 crashed (a0 ok)
    assert mid["debug_fixes_parent"] == pytest.approx(1 / 2)    # m2 fixed a2; m4 did not fix m3
    assert (mid["root_run_id"], mid["lineage_depth"]) == ("root", 1)
    leaf = lineage.one('SELECT * FROM "run_metrics" WHERE "run_id" = ?', "leaf")
    assert leaf["improve_keeps_valid"] == 1.0 and leaf["debug_fixes_parent"] is None
    assert (leaf["root_run_id"], leaf["lineage_depth"]) == ("root", 2)
    assert leaf["gpu_declared_rate"] == pytest.approx(1 / 2)
    assert (leaf["decl_malformed_count"], leaf["gpu_idle_kills"]) == (1, 1)
    assert leaf["health_gate_step1"] is True  # round 3's one task has an ok node (l1, 0.1)


def test_health_gate_fails_on_a_task_without_an_ok_node_or_a_bad_reward(rows):
    rows.run("g1", arm="hr_b")
    rows.node("g1", 1, "a", "x", status="ok", reward=0.5)
    rows.task_round("g1", 1, "b", summary=False)  # 0 records
    rows.run("g2", arm="hr_b")
    rows.node("g2", 1, "a", "x", status="ok", reward=1.5)
    rows.run("g3", arm="hr_b")
    rows.node("g3", 4, "a", "x", status="ok", reward=1.0)
    rows.node("g3", 5, "a", "y", status="crashed", reward=-0.5)
    rows.run("g4", arm="hr_b")  # an ok node without a reward fails it
    rows.node("g4", 1, "a", "x", status="ok", reward=None)
    rows.node("g4", 1, "b", "y", status="ok", reward=0.5)
    rows.run("g5", arm="hr_b")  # only the first round counts: round 2's bad reward and empty task do not
    rows.node("g5", 1, "a", "x", status="ok", reward=0.0)
    rows.node("g5", 1, "a", "y", status="crashed", reward=-0.5)
    rows.node("g5", 2, "a", "z", status="ok", reward=2.0)
    rows.task_round("g5", 2, "b", summary=False)
    rows.run("g6", arm="hr_b")  # the first round is a task-round with no record: no ok node there
    rows.task_round("g6", 1, "a", summary=True)
    rows.node("g6", 2, "a", "x", status="ok", reward=0.5)
    rows.run("g7", arm="hr_b")  # no task-round at all
    gate = {r["run_id"]: r["health_gate_step1"]
            for r in rows.query('SELECT "run_id", "health_gate_step1" FROM "run_metrics"')}
    assert gate == {"g1": False, "g2": False, "g3": True, "g4": False, "g5": True, "g6": False, "g7": None}
    by_task_rounds = {r["run_id"]: r["gate"] for r in rows.query(
        'SELECT f."run_id", bool_and(m."valid" >= 1) AND bool_and(m."valid_rewards_out_of_range" = 0) AS "gate" '
        'FROM "run_metrics" AS f JOIN "task_round_metrics" AS m '
        'ON m."run_id" = f."run_id" AND m."round" = f."first_round" GROUP BY f."run_id"')}
    assert by_task_rounds == {k: v for k, v in gate.items() if v is not None}  # as task_round_metrics counts


def test_run_status_counts(lineage):
    got = {(r["run_id"], r["status"]): r["n"] for r in
           lineage.query('SELECT * FROM "run_status_counts"')}
    assert got == {("root", "ok"): 4, ("root", "crashed"): 1, ("mid", "ok"): 2,
                   ("mid", "crashed"): 2, ("leaf", "ok"): 1, ("leaf", "no_code"): 1}


def test_decision_rule_compares_with_the_lineage_roots_first_round(lineage):
    got = {(r["run_id"], r["task"], r["k"]): r for r in
           lineage.query('SELECT * FROM "decision_rule"')}
    leaf = got[("leaf", "a", 3)]
    assert (leaf["root_run_id"], leaf["first_round"]) == ("root", 1)
    assert leaf["delta"] == pytest.approx(0.1 - 0.3) and leaf["moved"] is False
    mid = got[("mid", "a", 2)]
    assert mid["delta"] == pytest.approx((0.9 + 0.1) / 2 - 0.3) and mid["moved"] is True
    assert got[("mid", "b", 2)]["delta"] is None          # no ok node at mid round 2 for b
    assert got[("root", "a", 2)]["delta"] is None and got[("root", "a", 2)]["moved"] is None
    assert got[("root", "b", 1)]["delta"] == 0 and got[("root", "b", 1)]["moved"] is False


def test_resume_link_to_an_unknown_run_gives_null_delta(rows):
    rows.run("orphan", arm="hr_b", resumed_from="gone")
    rows.node("orphan", 6, "a", "x", status="ok", reward=0.5)
    r = rows.one('SELECT * FROM "decision_rule"')
    assert (r["root_run_id"], r["first_round"], r["delta"]) == ("gone", None, None)


def test_resume_cycle_terminates(rows):
    rows.run("p", resumed_from="q")
    rows.run("q", resumed_from="p")
    got = rows.query('SELECT * FROM "run_lineage" ORDER BY "run_id", "depth"')
    assert [(r["run_id"], r["ancestor_run_id"]) for r in got] == [
        ("p", "p"), ("p", "q"), ("q", "q"), ("q", "p")]


# run_lineage as written before it walked the runs table only: every run id of runs and nodes
# started the recursion
LINEAGE_OVER_EVERY_RUN = """
WITH RECURSIVE
all_runs AS (SELECT DISTINCT "run_id" FROM (SELECT "run_id" FROM "runs" UNION ALL SELECT "run_id" FROM "nodes")),
chain("run_id", "ancestor_run_id", "depth", "path") AS (
    SELECT "run_id", "run_id", 0, ["run_id"] FROM all_runs
    UNION ALL
    SELECT c."run_id", r."resumed_from_run", c."depth" + 1, list_append(c."path", r."resumed_from_run")
    FROM chain AS c JOIN "runs" AS r ON r."run_id" = c."ancestor_run_id"
    WHERE r."resumed_from_run" IS NOT NULL AND NOT list_contains(c."path", r."resumed_from_run"))
SELECT c."run_id", c."ancestor_run_id", c."depth", r."run_id" IS NOT NULL AS "ancestor_known",
       c."depth" = max(c."depth") OVER (PARTITION BY c."run_id") AS "is_root"
FROM chain AS c LEFT JOIN "runs" AS r ON r."run_id" = c."ancestor_run_id"
ORDER BY ALL"""


def test_lineage_of_runs_with_records_and_no_runs_row(lineage, rows):
    """A run whose records have no runs row is its own root (ancestor unknown); a run resumed
    from an unknown run and a cycle keep their rows: the same rows as the recursion over every
    run id of runs and nodes."""
    rows.node("orphan", 1, "a", "o1", status="ok", reward=0.5)
    rows.node("orphan", 2, "a", "o2", status="ok", reward=0.5)
    rows.run("stray", resumed_from="gone", resumed_step=4)
    rows.run("p", resumed_from="q")
    rows.run("q", resumed_from="p")
    got = rows.query('SELECT * FROM "run_lineage" ORDER BY ALL')
    assert got == rows.query(LINEAGE_OVER_EVERY_RUN)
    orphan = [r for r in got if r["run_id"] == "orphan"]
    assert orphan == [{"run_id": "orphan", "ancestor_run_id": "orphan", "depth": 0,
                       "ancestor_known": False, "is_root": True}]
    assert rows.one('SELECT "root_run_id", "lineage_depth", "nodes" FROM "run_metrics" WHERE "run_id" = ?',
                    "orphan") == {"root_run_id": "orphan", "lineage_depth": 0, "nodes": 2}
    assert [(r["ancestor_run_id"], r["ancestor_known"], r["is_root"]) for r in got if r["run_id"] == "stray"] == [
        ("gone", False, True), ("stray", True, False)]


def test_run_metrics_headline_columns(lineage, rows):
    """A round's value is the mean over its tasks (a task with no valid node has none); latest
    is the highest round's, best the highest round value; valid_rate and reward_best are over
    every record; loss_latest is the highest step's loss."""
    rows.insert("step_metrics", run_id="root", step=1, loss=0.3)
    rows.insert("step_metrics", run_id="root", step=2, loss=0.1)
    root = rows.one('SELECT * FROM "run_metrics" WHERE "run_id" = ?', "root")
    assert root["valid_reward_mean_best"] == pytest.approx((0.3 + 0.5) / 2)  # round 1: tasks a and b
    assert root["valid_reward_mean_latest"] is None  # round 2: its one node crashed
    assert (root["last_round"], root["valid_rate"], root["reward_best"]) == (2, pytest.approx(4 / 5), 0.5)
    assert (root["task_set"], root["loss_latest"], root["response_cap"]) == ("a,b", 0.1, 12288)
    mid = rows.one('SELECT * FROM "run_metrics" WHERE "run_id" = ?', "mid")
    assert mid["valid_reward_mean_latest"] == mid["valid_reward_mean_best"] == pytest.approx(0.5)  # b has none
    assert (mid["valid_rate"], mid["reward_best"], mid["loss_latest"]) == (pytest.approx(0.5), 0.9, None)
    rounds = {r["round"]: r for r in rows.query('SELECT * FROM "round_metrics" WHERE "run_id" = ?', "root")}
    assert rounds[1]["valid_reward_mean"] == pytest.approx(0.4) and rounds[1]["valid_rate"] == 1.0
    assert rounds[2]["valid_reward_mean"] is None and rounds[2]["valid_rate"] == 0.0


def test_round_metrics_splits_the_gen_phase_into_generation_and_execution(rows):
    """Generation 2 s and execution 79 s inside an 80 s gen phase: 1 s of them ran at once;
    30 s and 51 s one after the other inside a 90 s phase: no overlap, 9 s were neither;
    100 s of execution summed over tasks inside a 60 s phase: not one process's, not split."""
    for run in ("a", "b", "c"):
        rows.run(run)
    rows.task_round("a", 1, "t", gen_llm_seconds=1.5, gen_exec_seconds=40.0)
    rows.task_round("a", 1, "u", gen_llm_seconds=0.5, gen_exec_seconds=39.0)
    rows.task_round("b", 1, "t", gen_llm_seconds=30.0, gen_exec_seconds=51.0)
    rows.step("a", 1, 100.0, line_no=1, gen_s=80.0)
    rows.step("b", 1, 100.0, line_no=1, gen_s=90.0)
    rows.task_round("c", 1, "t", gen_llm_seconds=10.0, gen_exec_seconds=100.0)
    rows.step("c", 1, 100.0, line_no=1, gen_s=60.0)
    got = {r.pop("run_id"): r for r in rows.query(
        'SELECT "run_id", "generation_s", "execution_s", "gen_overlap_s", "gen_other_s" FROM "round_metrics"')}
    assert got["a"] == {"generation_s": 2.0, "execution_s": 79.0, "gen_overlap_s": 1.0, "gen_other_s": 0.0}
    assert got["b"] == {"generation_s": 30.0, "execution_s": 51.0, "gen_overlap_s": 0.0, "gen_other_s": 9.0}
    assert got["c"] == {"generation_s": 10.0, "execution_s": 100.0, "gen_overlap_s": None, "gen_other_s": None}
