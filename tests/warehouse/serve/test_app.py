"""The dashboard's pages through Starlette's TestClient on the demo warehouse: what each page
shows against the views, the live version, busy and not-found answers, offline assets."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.warehouse.serve.conftest import add_round, sql
from warehouse.config import db_path_from_url


@pytest.fixture(scope="module")
def client(demo_url):
    from starlette.testclient import TestClient

    from warehouse.serve.app import create_app

    with TestClient(create_app(demo_url)) as c:
        yield c


def charts_of(html: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="charts">(.*?)</script>', html, re.S)
                      .group(1))


def a_run_with_tasks(url: str) -> str:
    return sql(url, 'SELECT "run_id" FROM "task_round_metrics" GROUP BY 1 ORDER BY count(DISTINCT "task") DESC, '
                    'count(*) DESC, 1 LIMIT 1')[0][0]


def test_runs_page_lists_every_run_with_status_counts(client, demo_url):
    html = client.get("/").text
    runs = [r[0] for r in sql(demo_url, 'SELECT "run_id" FROM "run_metrics"')]
    assert html.count('<input type="checkbox" name="run"') == len(runs) > 3
    assert all(f'value="{r}"' in html for r in runs)
    ok = sql(demo_url, 'SELECT "run_id", "n" FROM "run_status_counts" WHERE "status" = \'ok\' ORDER BY "n" DESC')[0]
    row = re.search(rf'<tr data-run="{re.escape(ok[0])}".*?</tr>', html, re.S).group(0)
    assert f'data-col="status-ok" data-value="{ok[1]}">{ok[1]}</td>' in row


def test_runs_page_filters_by_arm_and_kind(client, demo_url):
    arm, n = sql(demo_url, 'SELECT "arm", count(*) FROM "runs" WHERE "arm" IS NOT NULL GROUP BY 1 ORDER BY 2 DESC, 1')[0]
    html = client.get("/", params={"arm": arm}).text
    assert html.count('name="run" value=') == n
    kinds = sql(demo_url, 'SELECT "kind", count(*) FROM "runs" GROUP BY 1 ORDER BY 1')
    for kind, count in kinds:
        assert client.get("/", params={"kind": kind}).text.count('name="run" value=') == count


def test_run_page_has_five_panels_per_task_the_phases_and_step_metrics(client, demo_url):
    run_id = a_run_with_tasks(demo_url)
    response = client.get(f"/runs/{run_id}")
    assert response.status_code == 200
    charts = charts_of(response.text)
    tasks = [t for (t,) in sql(demo_url, 'SELECT DISTINCT "task" FROM "task_round_metrics" WHERE "run_id" = ?', run_id)]
    assert len([k for k in charts if k.startswith("task-")]) == 5 * len(tasks)
    assert "phases" in charts
    steps = sql(demo_url, 'SELECT count(*) FROM "step_metrics" WHERE "run_id" = ?', run_id)[0][0]
    assert ({"step-loss", "step-kl", "step-entropy", "step-lr", "step-clip_frac"} <= set(charts)) == (steps > 0)

    rounds = sorted({r for (r,) in sql(demo_url, 'SELECT "round" FROM "task_round_metrics" WHERE "run_id" = ?', run_id)})
    shares = charts["task-0-1"]["data"]  # every status of the task's nodes, stacked: each round sums to 1
    statuses = sql(demo_url, 'SELECT DISTINCT coalesce("status", \'NULL\') FROM "nodes" WHERE "run_id" = ? '
                             'AND "task" = ?', run_id, sorted(tasks)[0])
    assert sorted(t["name"] for t in shares) == sorted(s for (s,) in statuses)
    for i, _ in enumerate(shares[0]["x"]):
        assert sum(t["y"][i] for t in shares) == pytest.approx(1.0)
    assert set(shares[0]["x"]) <= set(rounds)


def test_a_run_with_only_a_wandb_history_draws_its_step_metrics_from_it(client, demo_url):
    run_id, n = sql(demo_url, 'SELECT r."run_id", count(*) FROM "runs" r JOIN "wandb_history" h USING ("wandb_run") '
                              'GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1')[0]
    assert sql(demo_url, 'SELECT count(*) FROM "step_metrics" WHERE "run_id" = ?', run_id)[0][0] == 0
    html = client.get(f"/runs/{run_id}").text
    charts = charts_of(html)
    kl = [json.loads(r)["actor/kl_loss"] for (r,) in sql(
        demo_url, 'SELECT h."row" FROM "wandb_history" h JOIN "runs" r USING ("wandb_run") WHERE r."run_id" = ? '
                  'ORDER BY h."step"', run_id)]
    assert charts["step-kl"]["data"][0]["y"] == pytest.approx(kl) and len(kl) == n
    assert 'id="step-source"' in html and 'id="no-step-metrics"' not in html
    assert "step-loss" not in charts  # no loss in that history: no empty panel


def test_unknown_run_and_node_are_404_pages(client):
    response = client.get("/runs/no_such_run")
    assert response.status_code == 404 and "no run &#39;no_such_run&#39;" in response.text
    assert client.get("/runs/no_such_run/nodes/x").status_code == 404
    assert client.get("/runs/no_such_run/nodes").status_code == 404
    missing = client.get("/api/runs/no_such_run/version")
    assert missing.status_code == 404 and missing.json() == {"error": "no run 'no_such_run' in the warehouse"}


def test_version_changes_when_a_round_lands(client, demo_url):
    run_id = a_run_with_tasks(demo_url)
    before = client.get(f"/api/runs/{run_id}/version").json()["version"]
    last = sql(demo_url, 'SELECT max("round") FROM "nodes" WHERE "run_id" = ?', run_id)[0][0]
    tasks = [t for (t,) in sql(demo_url, 'SELECT DISTINCT "task" FROM "nodes" WHERE "run_id" = ?', run_id)]
    add_round(demo_url, run_id, tasks[:1], last + 1)
    after = client.get(f"/api/runs/{run_id}/version").json()["version"]
    assert after != before
    charts = charts_of(client.get(f"/runs/{run_id}").text)
    task_index = sorted({t for (t,) in sql(demo_url, 'SELECT DISTINCT "task" FROM "task_round_metrics" '
                                                     'WHERE "run_id" = ?', run_id)}).index(tasks[0])
    assert last + 1 in charts[f"task-{task_index}-1"]["data"][0]["x"]


def test_compare_picks_runs_and_arms_and_reads_the_decision_rule(client, demo_url):
    runs = [r for (r,) in sql(demo_url, 'SELECT "run_id" FROM "task_round_metrics" GROUP BY 1 '
                                        'HAVING count(DISTINCT "round") > 1 ORDER BY 1 LIMIT 2')]
    html = client.get("/compare", params=[("run", r) for r in runs]).text
    figure = charts_of(html)["compare"]
    assert len(figure["data"]) == 5 * len(runs)  # a panel per metric, a line per run in each
    assert [figure["layout"][f"yaxis{i if i > 1 else ''}"]["title"]["text"] for i in range(1, 6)] == [
        "valid_reward_mean", "valid_rate", "reward_best", "mean_response_tokens", "resp_clip_rate"]
    assert {t.get("xaxis", "x") for t in figure["data"]} == {"x"}  # one shared round axis
    means = sql(demo_url, 'SELECT "round", avg("valid_rate") FROM "task_round_metrics" WHERE "run_id" = ? '
                          'GROUP BY 1 ORDER BY 1', runs[0])
    trace = figure["data"][len(runs)]  # the valid_rate panel's first run
    assert trace["yaxis"] == "y2" and trace["name"].startswith(runs[0])
    assert trace["x"] == [r for r, _ in means]
    assert trace["y"] == pytest.approx([v for _, v in means], nan_ok=True)
    k = int(re.search(r'name="k" value="(\d+)"', html).group(1))
    moved = sql(demo_url, 'SELECT count(*) FILTER (WHERE "moved") FROM "decision_rule" WHERE "run_id" = ? AND "k" = ?',
                runs[0], k)[0][0]
    row = re.search(rf'<tr><td class="text"><a href="/runs/{re.escape(runs[0])}">.*?</tr>', html, re.S).group(0)
    assert f"<strong>{moved}</strong>" in row
    arm, n = sql(demo_url, 'SELECT "arm", count(*) FROM "runs" WHERE "arm" IS NOT NULL AND "run_id" IN '
                           '(SELECT "run_id" FROM "task_round_metrics") GROUP BY 1 ORDER BY 2 DESC, 1')[0]
    assert len(charts_of(client.get("/compare", params={"arm": arm}).text)["compare"]["data"]) == 5 * n


def test_compare_values_are_each_tasks_metric_averaged_in_python_or_the_one_tasks_own(demo_url):
    """The page reads the view round_task_means; the same numbers come from averaging
    task_round_metrics' rows here, a task with a NULL value left out."""
    from warehouse.serve import data

    metrics = data.COMPARE_METRICS
    found = sql(demo_url, f'SELECT "run_id", "round", "task", {", ".join(metrics)} FROM "task_round_metrics"')
    runs = sorted({r[0] for r in found})
    by_round: dict = {}
    for run_id, round_, task, *values in found:
        by_round.setdefault((run_id, round_), []).append((task, values))
    page = data.compare_page(demo_url, runs, [])
    compared = 0
    for series in page.series:
        rounds = sorted(r for run_id, r in by_round if run_id == series.run_id)
        assert series.rounds == rounds
        for i, m in enumerate(metrics):
            for round_, got in zip(rounds, series.values[m]):
                values = [v[i] for _, v in by_round[(series.run_id, round_)] if v[i] is not None]
                assert got == (pytest.approx(sum(values) / len(values)) if values else None), (series.run_id, m)
                compared += bool(values)
    assert compared > 50  # the demo has dozens of run rounds with values
    run_id, round_, task = next((r, n, t) for (r, n), tasks in sorted(by_round.items()) if len(tasks) > 1
                                for t, _ in tasks)
    (one,) = [s for s in data.compare_page(demo_url, [run_id], [], task=task).series]
    own = dict(by_round[(run_id, round_)])[task]
    assert [one.values[m][one.rounds.index(round_)] for m in metrics] == own


def test_compare_by_arm_skips_the_arms_runs_without_rounds(demo_url, tmp_path):
    import shutil

    from warehouse.db import connect
    from warehouse.serve import data

    copy = tmp_path / "wh.duckdb"
    shutil.copyfile(db_path_from_url(demo_url), copy)
    url = f"duckdb:///{copy}"
    arm = sql(url, 'SELECT "arm" FROM "runs" WHERE "run_id" IN (SELECT "run_id" FROM "task_round_metrics") '
                   'AND "arm" IS NOT NULL ORDER BY 1 LIMIT 1')[0][0]
    before = [s.run_id for s in data.compare_page(url, [], [arm]).series]
    with connect(url) as con:
        con.execute("INSERT INTO runs (run_id, kind, arm, lost) VALUES ('launch_failed', 'training', ?, false)", [arm])
    page = data.compare_page(url, [], [arm])
    assert [s.run_id for s in page.series] == before and page.k is not None  # no dashes for it
    assert "launch_failed" in [s.run_id for s in data.compare_page(url, ["launch_failed"], [arm]).series]


def test_compare_pickers_list_what_run_metrics_lists(demo_url, tmp_path):
    """The pickers read the key tables, not run_metrics; they offer the runs, arms, models and
    task sets of run_metrics' rows, a failed launch (a runs row, no rounds: the compare tables
    skip it) and a run with steps but no runs row and no nodes included."""
    import shutil

    from warehouse.db import connect
    from warehouse.serve import data

    copy = tmp_path / "wh.duckdb"
    shutil.copyfile(db_path_from_url(demo_url), copy)
    url = f"duckdb:///{copy}"
    with connect(url) as con:
        con.execute("INSERT INTO runs (run_id, kind, arm, model, lost) "
                    "VALUES ('launch_failed', 'training', 'arm_of_a_failed_launch', 'model_of_a_failed_launch', false)")
        con.execute("INSERT INTO steps (source_id, line_no, run_id, step) VALUES (-1, 1, 'steps_only', 1)")
    known = sql(url, 'SELECT "run_id", "arm", "model", "task_set" FROM "run_metrics" ORDER BY "run_id"')
    choices = data.compare_page(url, [], []).choices
    assert choices["runs"] == [r[0] for r in known]
    assert {"launch_failed", "steps_only"} <= set(choices["runs"])
    assert choices["arms"] == sorted({r[1] for r in known if r[1] is not None})
    assert choices["models"] == sorted({r[2] for r in known if r[2] is not None})
    assert choices["task_sets"] == sorted({r[3] for r in known if r[3] is not None})
    assert "arm_of_a_failed_launch" in choices["arms"] and "model_of_a_failed_launch" in choices["models"]
    assert len(choices["task_sets"]) > 1 and len(choices["models"]) > 2
    # a pick by model or arm matches the runs that run_metrics gives it
    page = data.compare_page(url, [], [], models=["model_of_a_failed_launch"])
    assert page.series == []  # the failed launch has no rounds to compare
    (model, n), = sql(url, 'SELECT "model", count(*) FROM "run_metrics" WHERE "rounds" > 0 AND "model" IS NOT NULL '
                           'GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1')
    assert len(data.compare_page(url, [], [], models=[model]).series) == n


def test_compare_reads_each_runs_decision_rule_at_its_step(demo_url):
    """The readings of all picked runs come from one statement; each equals decision_rule's
    rows of its own run at its step: the shared last step, each run's own last round when
    they share none, a step some run lacks (no rows: zeros), and one task's rows."""
    from warehouse.serve import data

    def own(run_id, k, task=None):
        moved, measured, tasks = sql(demo_url, 'SELECT count(*) FILTER (WHERE "moved"), count("delta"), count(*) '
                                               'FROM "decision_rule" WHERE "run_id" = ? AND "k" = ? '
                                               'AND (CAST(? AS VARCHAR) IS NULL OR "task" = ?)', run_id, k, task, task)[0]
        return {"k": k, "moved": moved, "measured": measured, "tasks": tasks}

    runs = [r for (r,) in sql(demo_url, 'SELECT "run_id" FROM "decision_rule" GROUP BY 1 ORDER BY max("k") DESC, 1')]
    assert len(runs) > 3
    last = {r: k for r, k in sql(demo_url, 'SELECT "run_id", max("k") FROM "decision_rule" GROUP BY 1')}
    (task,), = sql(demo_url, 'SELECT "task" FROM "decision_rule" WHERE "run_id" = ? GROUP BY 1 ORDER BY 1 LIMIT 1',
                   runs[0])
    cases = [(None, None), (1, None), (last[runs[0]], None), (None, task)]
    checked = set()
    for k, task_ in cases:
        page = data.compare_page(demo_url, runs, [], task=task_, k=k)
        for s in page.series:
            if page.k is None and not s.rounds:
                assert s.reading is None  # no step to read it at
                continue
            at = page.k if page.k is not None else max(s.rounds)
            assert s.reading == own(s.run_id, at, task_), (s.run_id, k, task_)
            checked.add((s.reading["tasks"] > 0, s.reading["moved"] > 0))
    assert checked >= {(True, True), (True, False), (False, False)}  # rows moved, rows not, no rows


def test_compare_of_an_unknown_run_is_a_404(client):
    assert client.get("/compare", params={"run": "nope"}).status_code == 404


def test_quality_lists_every_violation_and_links_its_node(client, demo_url):
    html = client.get("/quality").text
    count = sql(demo_url, 'SELECT count(*) FROM "invariant_violations"')[0][0]
    assert count > 0 and html.count("<tr><td>") == count
    links = re.findall(r'class="node-link" href="([^"]+)"', html)
    assert links
    node_page = client.get(links[0].replace("&amp;", "&"))
    assert node_page.status_code == 200 and "<h2>Code</h2>" in node_page.text


def test_node_page_shows_plan_code_term_tail_and_prompt(client, demo_url):
    run_id, node_id, rnd, plan, code, tail = sql(
        demo_url, 'SELECT n."run_id", n."node_id", n."round", n."plan", p."code", n."term_tail" FROM "nodes" n '
                  'JOIN "node_payloads" p USING ("source_id", "line_no") WHERE n."plan" IS NOT NULL AND '
                  'p."code" IS NOT NULL AND n."term_tail" IS NOT NULL AND p."prompt_messages" IS NOT NULL LIMIT 1')[0]
    html = client.get(f"/runs/{run_id}/nodes/{node_id}", params={"round": rnd}).text
    from markupsafe import escape  # Jinja's own escaping

    for text in (plan, code, tail):
        assert str(escape(text)) in html
    assert html.count('<pre class="prompt">') >= 1


def test_every_asset_is_served_locally(client):
    for path in ("/", "/compare", "/quality"):
        html = client.get(path).text
        sources = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert not [s for s in sources if s.startswith(("http:", "https:", "//"))]
    js = client.get("/static/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000 and b"plotly.js" in js.content[:500]
    assert client.get("/static/app.js").status_code == 200


def test_a_locked_warehouse_is_a_busy_page_then_reads_again(client, demo_url, monkeypatch):
    from warehouse.serve import data

    monkeypatch.setattr(data, "BUSY_WAIT_S", 0.3)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('locked', flush=True); time.sleep(60)", db_path_from_url(demo_url)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        page = client.get("/")
        assert page.status_code == 503 and "Busy" in page.text and page.headers["retry-after"] == "2"
        api = client.get("/api/runs/x/version")
        assert api.status_code == 503 and api.json()["busy"] is True
    finally:
        holder.kill()
        holder.wait()
    assert client.get("/").status_code == 200


def test_a_reward_model_run_gets_scores_by_progress_and_proxy_against_final(client, demo_url):
    run_id = sql(demo_url, 'SELECT "run_id" FROM "rm_runs" LIMIT 1')[0][0]
    html = client.get(f"/runs/{run_id}").text
    charts = charts_of(html)
    series = sql(demo_url, 'SELECT "phase", count(DISTINCT ("job", "split")) FROM "rm_scores_by_progress" '
                           'WHERE "run_id" = ? AND "score" IS NOT NULL AND "progress" IS NOT NULL GROUP BY 1', run_id)
    assert {f"rm-{phase}": n for phase, n in series} == {k: len(v["data"]) for k, v in charts.items()
                                                         if k != "rm-proxy-final"}
    formal = charts["rm-formal"]["data"][0]
    assert formal["error_y"]["array"] and all(se >= 0 for se in formal["error_y"]["array"])
    pairs = sql(demo_url, 'SELECT "proxy_score", "final_score" FROM "rm_proxy_vs_final" WHERE "run_id" = ? '
                          'ORDER BY "job", "progress"', run_id)
    points = charts["rm-proxy-final"]["data"][0]
    assert points["x"] == pytest.approx([p for p, _ in pairs]) and points["y"] == pytest.approx([f for _, f in pairs])
    reference = sql(demo_url, 'SELECT f."score" FROM "rm_runs" r JOIN "rm_references" f USING ("reference_id") '
                              'WHERE r."run_id" = ?', run_id)[0][0]
    assert charts["rm-formal"]["layout"]["shapes"][0]["y0"] == pytest.approx(reference)
    evaluations = sql(demo_url, 'SELECT count(*) FROM "rm_evaluations" WHERE "run_id" = ?', run_id)[0][0]
    table = html.split('id="rm-evaluations"')[1].split("</table>")[0]
    assert table.count("<tr>") == evaluations + 1  # + the header row


# --- the runs table as a metric table, the run headline, the split gen phase ------------------

METRIC_COLUMNS = ("valid_reward_mean_latest", "valid_reward_mean_best", "valid_rate", "reward_best", "loss_latest")


def cell_values(html: str, run_id: str) -> dict:
    row = re.search(rf'<tr data-run="{re.escape(run_id)}".*?</tr>', html, re.S).group(0)
    return dict(re.findall(r'<td data-col="([^"]+)" data-value="([^"]*)"', row))


def test_runs_table_shows_run_metrics_headline_columns(client, demo_url):
    html = client.get("/").text
    want = sql(demo_url, f'SELECT "run_id", "response_cap", {", ".join(METRIC_COLUMNS)} FROM "run_metrics"')
    assert any(r[2] is not None for r in want) and any(r[1] is not None for r in want)
    for run_id, cap, *values in want:
        shown = cell_values(html, run_id)
        assert shown["caps"] == ("" if cap is None else str(cap))
        for name, value in zip(METRIC_COLUMNS, values):
            assert (shown[name] == "") if value is None else float(shown[name]) == pytest.approx(value), (run_id, name)


def test_runs_table_adds_any_run_metrics_column_and_refuses_unknown_ones(client, demo_url):
    html = client.get("/", params={"col": ["gpu_idle_kills", "task_set"]}).text
    for run_id, kills in sql(demo_url, 'SELECT "run_id", "gpu_idle_kills" FROM "run_metrics"'):
        assert cell_values(html, run_id)["gpu_idle_kills"] == str(kills)
    assert '<input type="hidden" name="col" value="task_set">' in html  # kept across the next filter
    bad = client.get("/", params={"col": "no_such_column"})
    assert bad.status_code == 400 and "run_metrics has no such column" in bad.text
    assert client.get("/", params={"group": "colour"}).status_code == 400


@pytest.mark.parametrize("group, column", [("arm", "arm"), ("model", "model"), ("task_set", "task_set"),
                                           ("question", "question_id")])
def test_runs_grouped_give_each_groups_mean_and_best_from_sql(client, demo_url, group, column):
    html = client.get("/", params={"group": group}).text
    table = re.search(r'<table id="groups-table".*?</table>', html, re.S).group(0)
    want = {key: (n, mean, best, low) for key, n, mean, best, low in sql(
        demo_url, f'SELECT "{column}", count(*), avg("valid_reward_mean_best"), max("valid_reward_mean_best"), '
                  f'min("loss_latest") FROM "run_metrics" GROUP BY 1')}
    rows = re.findall(r'<tr data-key="([^"]*)">(.*?)</tr>', table, re.S)
    assert len(rows) == len(want) > 1
    for key, row in rows:
        n, mean, best, _ = want[key or None]
        cells = dict(re.findall(r'data-col="([^"]+)" data-value="([^"]*)"', row))
        assert int(cells["runs"]) == n
        assert (cells["mean-valid_reward_mean_best"] == "") if mean is None else \
            float(cells["mean-valid_reward_mean_best"]) == pytest.approx(mean)
        assert (cells["best-valid_reward_mean_best"] == "") if best is None else \
            float(cells["best-valid_reward_mean_best"]) == pytest.approx(best)
    # the runs table lists the runs group by group, in the groups' order
    order = [k or None for k, _ in rows]
    runs = re.findall(r'<tr data-run="([^"]+)"', html)
    key_of = dict(sql(demo_url, f'SELECT "run_id", "{column}" FROM "run_metrics"'))
    assert [order.index(key_of[r]) for r in runs] == sorted(order.index(key_of[r]) for r in runs)


def test_run_page_headline_reads_round_metrics(client, demo_url):
    run_id = a_run_with_tasks(demo_url)
    html = client.get(f"/runs/{run_id}").text
    assert html.index('id="headline"') < html.index('id="phases"') < html.index('id="task-0"')
    headline = charts_of(html)["headline"]
    want = sql(demo_url, 'SELECT "round", "valid_reward_mean", "reward_best", "valid_rate" FROM "round_metrics" '
                         'WHERE "run_id" = ? AND "nodes" > 0 ORDER BY "round"', run_id)
    by_name = {t["name"]: t for t in headline["data"]}
    assert by_name["valid_reward_mean"]["x"] == [r[0] for r in want]
    assert by_name["valid_reward_mean"]["y"] == pytest.approx([r[1] for r in want])
    assert by_name["reward_best"]["y"] == pytest.approx([r[2] for r in want])
    rate = by_name["valid_rate (right axis)"]
    assert rate["yaxis"] == "y2" and rate["y"] == pytest.approx([r[3] for r in want])


def test_phase_chart_splits_gen_into_generation_execution_and_their_overlap(client, demo_url):
    run_id = sql(demo_url, 'SELECT "run_id" FROM "round_metrics" WHERE "gen_overlap_s" > 0 ORDER BY 1 LIMIT 1')[0][0]
    phases = charts_of(client.get(f"/runs/{run_id}").text)["phases"]
    by_name = {t["name"]: t for t in phases["data"]}
    assert {"generation", "generation ∥ execution", "execution"} <= set(by_name)
    want = sql(demo_url, 'SELECT "round", "gen_s", "generation_s", "execution_s", "gen_overlap_s", "gen_other_s" '
                         'FROM "round_metrics" WHERE "run_id" = ? AND "total_s" IS NOT NULL ORDER BY "round"', run_id)
    parts = ("generation", "generation ∥ execution", "execution", "gen: other")
    for k, (rnd, gen, generation, execution, overlap, other) in enumerate(want):
        if overlap is None:  # not split (its summaries' seconds exceed the phase): the one gen bar
            assert by_name["gen"]["y"][k] == pytest.approx(gen) and all(by_name[p]["y"][k] == 0 for p in parts
                                                                        if p in by_name)
            continue
        assert by_name["generation ∥ execution"]["y"][k] == pytest.approx(overlap)
        assert by_name["generation"]["y"][k] + overlap == pytest.approx(generation)
        assert by_name["execution"]["y"][k] + overlap == pytest.approx(execution)
        assert sum(by_name[p]["y"][k] for p in parts if p in by_name) == pytest.approx(gen)  # they stack to gen



def test_compare_picks_runs_by_model_and_task_set_together(client, demo_url):
    """A model alone gives its runs; a model and a task set give only the runs on both (not
    every run of the model), and an arm narrows the same way."""
    model, task_set, n = sql(demo_url, 'SELECT "model", "task_set", count(*) FROM "run_metrics" WHERE "rounds" > 0 '
                                       'GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT 1')[0]
    of_model = {r for (r,) in sql(demo_url, 'SELECT "run_id" FROM "run_metrics" WHERE "model" = ? AND "rounds" > 0',
                                  model)}
    assert len(of_model) > n  # the model has runs on other task sets too: the task set narrows
    html = client.get("/compare", params={"model": model}).text
    assert set(re.findall(r'<tr><td class="text"><a href="/runs/([^"]+)">', html)) == of_model
    html = client.get("/compare", params={"model": model, "task_set": task_set}).text
    both = {r for (r,) in sql(demo_url, 'SELECT "run_id" FROM "run_metrics" WHERE "model" = ? AND "task_set" = ? '
                                        'AND "rounds" > 0', model, task_set)}
    assert set(re.findall(r'<tr><td class="text"><a href="/runs/([^"]+)">', html)) == both and len(both) == n
    assert len(charts_of(html)["compare"]["data"]) == 5 * n
    assert f'<option value="{task_set}" title="{task_set}" selected>' in html


def test_compare_draws_each_run_with_its_own_marker_so_coinciding_points_show(client, demo_url):
    runs = [r for (r,) in sql(demo_url, 'SELECT "run_id" FROM "task_round_metrics" GROUP BY 1 ORDER BY 1 LIMIT 3')]
    figure = charts_of(client.get("/compare", params=[("run", r) for r in runs]).text)["compare"]
    first_panel = figure["data"][:len(runs)]
    markers = [(t["marker"]["symbol"], t["marker"]["size"]) for t in first_panel]
    assert len(set(markers)) == len(runs)  # a symbol and size of its own each
    assert all(t["marker"]["symbol"].endswith("-open") for t in first_panel)  # open: the one behind shows through
    sizes = [size for _, size in markers]
    assert sizes == sorted(sizes, reverse=True)  # later runs drawn smaller, inside the earlier ones


def test_quality_expectations_lists_every_expectation_passed_ones_too(client, demo_url):
    from warehouse.quality.runner import run_checks

    assert 'href="/quality/expectations"' in client.get("/quality").text
    html = client.get("/quality/expectations").text
    report = run_checks(demo_url)
    results = re.findall(r'<tr data-result="(\w+)">', html)
    assert len(results) == len(report.outcomes) > 30
    assert results == ["pass" if o.success else "fail" for o in report.outcomes]
    assert "pass" in results and "fail" in results  # the probe's 1.5 reward fails check 1; the rest pass
    passed = sum(o.success for o in report.outcomes)
    assert f'data-passed="{passed}" data-total="{len(report.outcomes)}"' in html


def test_a_run_exists_for_the_nodes_page_when_any_of_its_tables_names_it(tmp_path):
    """The nodes page's check reads runs, nodes, task_rounds and steps in turn: a run named only
    by its nodes or only by its timing rows is there; a run none names is not."""
    from warehouse.db import connect
    from warehouse.migrate import init_db
    from warehouse.serve.data import _has_rows

    url = f"duckdb:///{tmp_path / 'wh.duckdb'}"
    init_db(url)
    with connect(url) as con:
        con.execute("INSERT INTO nodes (source_id, line_no, run_id, round, task, node_id) VALUES (1, 1, 'n', 1, 't', 'a')")
        con.execute("INSERT INTO steps (source_id, line_no, run_id, step) VALUES (2, 1, 's', 1)")
        con.execute("INSERT INTO task_rounds (run_id, round, task, summary_present, node_file_present, has_tree, "
                    "has_transcript) VALUES ('t', 1, 'x', true, false, false, false)")
        assert [_has_rows(con, run) for run in ("n", "s", "t", "none")] == [True, True, True, False]
