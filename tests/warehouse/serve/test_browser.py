"""`warehouse serve` in headless Chromium (Debian's chromium + chromium-driver, driven by
selenium): every page renders, its charts drew with the expected traces, its table rows match
a SQL count, the console has no errors, and a run page redraws after a round lands.
Screenshots of each page go to the folder the test prints ($BROWSER_SCREENSHOTS, else a temp
dir). Skipped, saying why, where Chromium or its driver is not installed (.ci/stage_browser.sh
installs both)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.warehouse.serve.conftest import add_round, sql
from warehouse.config import db_path_from_url

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1800")

selenium = pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[dev]')")
pytestmark = [
    pytest.mark.skipif(not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
                       reason="Chromium or chromedriver is absent: apt-get install chromium chromium-driver "
                              "(.ci/stage_browser.sh does)"),
    pytest.mark.slow,
]


@pytest.fixture(scope="module")
def shots(tmp_path_factory, pytestconfig):
    folder = Path(os.environ.get("BROWSER_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    yield folder
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\nScreenshots of every page: {folder}")


@pytest.fixture(scope="module")
def server(demo_url):
    """`warehouse serve` itself, in a subprocess on a free port, polling every second."""
    proc = subprocess.Popen([sys.executable, "-m", "warehouse.cli", "--db", db_path_from_url(demo_url), "serve",
                             "--port", "0", "--refresh", "1"], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    match = re.search(r"at (http://\S+?)/? ", line)
    assert match, f"no address in {line!r}"
    yield match.group(1)
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager fetch anything
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def load(browser, url: str, shots: Path, name: str, charts: bool = True):
    """Open `url`, wait for app.js to have drawn, save a screenshot; returns the console errors."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(url)
    if charts:
        WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.drawn"))
    browser.save_screenshot(str(shots / f"{name}.png"))
    return [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def chart_traces(browser) -> dict[str, int]:
    """Per drawn chart: the traces Plotly drew in its SVG (bar, box, line, histogram)."""
    return browser.execute_script("""
        const out = {};
        document.querySelectorAll('.chart').forEach((el) => {
          if (!el.querySelector('svg.main-svg')) return;
          out[el.id] = el.querySelectorAll('.cartesianlayer .trace').length;
        });
        return out;""")


def rows(browser, table_id: str) -> int:
    return browser.execute_script(f"return document.querySelectorAll('#{table_id} tbody tr').length")


def test_runs_page(browser, server, demo_url, shots):
    errors = load(browser, server + "/", shots, "runs", charts=False)
    assert errors == []
    assert rows(browser, "runs-table") == sql(demo_url, 'SELECT count(*) FROM "run_metrics"')[0][0]
    # it fits the 1,400 px window: no horizontal scroll of the page or of the table
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 1400
    assert browser.execute_script("const w = document.querySelector('.table-wrap'); return w.scrollWidth <= w.clientWidth")


def column(browser, col: str) -> list[str]:
    return browser.execute_script(f"""return Array.from(document.querySelectorAll('#runs-table tbody tr'))
        .filter((r) => !r.hidden).map((r) => r.querySelector('[data-col="{col}"]').dataset.value
                                              ?? r.querySelector('[data-col="{col}"]').textContent.trim());""")


def test_runs_page_sorts_searches_picks_columns_and_badges_states(browser, server, demo_url, shots):
    load(browser, server + "/", shots, "runs_sorted", charts=False)
    header = browser.find_element("css selector", '#runs-table th[data-col="nodes"]')
    header.click()  # descending first
    by_nodes = sql(demo_url, 'SELECT coalesce("nodes", 0) FROM "run_metrics" ORDER BY 1 DESC')
    assert [int(v) for v in column(browser, "nodes")] == [n for (n,) in by_nodes]
    header.click()
    assert [int(v) for v in column(browser, "nodes")] == [n for (n,) in reversed(by_nodes)]
    browser.find_element("css selector", '#runs-table th[data-col="run"]').click()
    assert column(browser, "run") == sorted(column(browser, "run"), reverse=True)
    # state: each row's badge is run_state's state; the lost run carries the lost badge
    states = dict(sql(demo_url, 'SELECT "run_id", "state" FROM "run_state"'))
    shown = browser.execute_script("""return Object.fromEntries(Array.from(document.querySelectorAll('#runs-table tbody tr'))
        .map((r) => [r.dataset.run, (r.querySelector('.badge') || {}).textContent || null]));""")
    assert {r: s for r, s in shown.items() if s} == {r: states[r] for r in shown if r in states}
    assert "lost" in shown.values()
    # search: rows whose text holds every word
    box = browser.find_element("id", "runs-search")
    box.send_keys("lost")
    assert column(browser, "state") == ["lost"] * list(states.values()).count("lost")
    assert "match" in browser.find_element("id", "runs-count").text
    box.clear()
    box.send_keys(" ")
    # column picker: hide the arm column, it stays hidden after a reload (localStorage)
    browser.find_element("css selector", ".column-picker summary").click()
    browser.find_element("css selector", '.column-picker input[data-col="arm"]').click()
    hidden = "return Array.from(document.querySelectorAll('#runs-table [data-col=arm]')).every((c) => c.hidden)"
    assert browser.execute_script(hidden)
    browser.refresh()
    assert browser.execute_script(hidden)
    browser.execute_script("localStorage.clear()")
    browser.save_screenshot(str(shots / "runs_sorted.png"))
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_rollout_browser_from_a_chart_point_and_the_token_view(browser, server, demo_url, shots):
    from selenium.webdriver.support.ui import WebDriverWait

    run_id, tasks = a_run(demo_url)
    load(browser, f"{server}/runs/{run_id}", shots, "run_for_click")
    # a bar of the status shares: the nodes of that task, round and status
    status, rnd = browser.execute_script("""
        const el = document.getElementById('task-0-1');
        const t = el.data[0];
        el.emit('plotly_click', {points: [{data: t, customdata: t.customdata[0], fullData: el._fullData[0]}]});
        return [t.name, t.customdata[0]];""")
    WebDriverWait(browser, 30).until(lambda d: "/nodes?" in d.current_url)
    want = sql(demo_url, 'SELECT count(*) FROM "nodes" WHERE "run_id" = ? AND "task" = ? AND "round" = ? AND '
                         'coalesce("status", \'NULL\') = ?', run_id, tasks[0], rnd, status)[0][0]
    assert int(browser.find_element("id", "nodes-count").get_attribute("data-total")) == want
    assert rows(browser, "nodes-table") == min(want, 100)
    # sort the page by reward (client side), then open a node
    browser.find_element("xpath", '//table[@id="nodes-table"]//th[text()="reward"]').click()
    browser.find_element("css selector", "#nodes-table a.node-link").click()
    # the page shows, then its token section arrives in place of the loading note
    WebDriverWait(browser, 30).until(lambda d: d.find_elements("id", "plan") and not d.find_elements("id", "tokens-loading"))
    node_id = browser.find_element("tag name", "h1").text.removeprefix("Node ")
    ids = sql(demo_url, 'SELECT len(p."response_token_ids") FROM "nodes" n JOIN "node_payloads" p USING '
                        '("source_id", "line_no") WHERE n."run_id" = ? AND n."node_id" = ? ORDER BY n."round" LIMIT 1',
              run_id, node_id)[0][0]
    assert browser.execute_script("return document.querySelectorAll('#tokens .tok').length") == ids
    # shading follows the logprob: the least likely token is the reddest (lowest lightness)
    light = browser.execute_script("""return Array.from(document.querySelectorAll('#tokens .tok'))
        .filter((t) => t.dataset.logprob !== '').map((t) => [Number(t.dataset.logprob), t.style.background]);""")
    if light:
        lowest = min(light)[1]
        assert lowest == min((b for _, b in light), key=lambda b: [int(x) for x in re.findall(r"\d+", b)][1:])
    browser.save_screenshot(str(shots / "node_tokens.png"))
    # its sibling group: every sibling is listed, and a sibling link opens that node
    siblings = browser.find_elements("css selector", "#siblings > li")
    group = sql(demo_url, 'SELECT count(*) FROM "nodes" a JOIN "nodes" b ON a."run_id" = b."run_id" AND '
                          'a."round" = b."round" AND a."task" = b."task" AND a."sibling_group" = b."sibling_group" '
                          'WHERE a."run_id" = ? AND a."node_id" = ? ', run_id, node_id)[0][0]
    assert len(siblings) == max(group, 1)
    links = browser.find_elements("css selector", "a.sibling-link")
    if links:
        other = links[0].text
        links[0].click()
        WebDriverWait(browser, 30).until(lambda d: d.find_element("tag name", "h1").text == f"Node {other}")
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_chart_controls_smooth_log_and_swap_the_x_axis(browser, server, demo_url, shots):
    from selenium.webdriver.support.ui import Select

    run_id, _ = a_run(demo_url)
    load(browser, f"{server}/runs/{run_id}", shots, "run_controls")
    lines = "return document.getElementById('task-0-4').data.length"
    before = browser.execute_script(lines)
    browser.execute_script("const s = document.getElementById('smoothing'); s.value = '0.6';"
                           "s.dispatchEvent(new Event('input', {bubbles: true}));")
    assert browser.execute_script(lines) == 2 * before  # each line smoothed, its raw line kept faint
    Select(browser.find_element("id", "x-axis")).select_by_value("wall")
    assert browser.execute_script("return document.getElementById('task-0-4').layout.xaxis.type") == "date"
    Select(browser.find_element("id", "x-axis")).select_by_value("round")
    browser.find_element("id", "log-y").click()
    timed = sql(demo_url, 'SELECT count(*) FROM "round_metrics" WHERE "run_id" = ? AND "total_s" IS NOT NULL', run_id)
    axis = "return document.getElementById('{}').layout.yaxis.type || 'linear'"
    if timed[0][0]:  # log where the panel allows it (loss, KL, phases), never on shares or rewards
        assert browser.execute_script(axis.format("phases")) == "log"
    assert browser.execute_script(axis.format("task-0-4")) == "linear"
    browser.execute_script("sessionStorage.clear()")
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def a_run(url: str) -> tuple[str, list[str]]:
    run_id = sql(url, 'SELECT "run_id" FROM "task_round_metrics" GROUP BY 1 ORDER BY count(DISTINCT "task") DESC, '
                      'count(*) DESC, 1 LIMIT 1')[0][0]
    tasks = [t for (t,) in sql(url, 'SELECT DISTINCT "task" FROM "task_round_metrics" WHERE "run_id" = ? ORDER BY 1',
                               run_id)]
    return run_id, tasks


def test_run_page_draws_every_panel(browser, server, demo_url, shots):
    run_id, tasks = a_run(demo_url)
    assert load(browser, f"{server}/runs/{run_id}", shots, "run") == []
    traces = chart_traces(browser)
    assert len([k for k in traces if k.startswith("task-")]) == 5 * len(tasks)
    statuses = sql(demo_url, 'SELECT count(DISTINCT coalesce("status", \'\')) FROM "nodes" WHERE "run_id" = ? '
                             'AND "task" = ?', run_id, tasks[0])[0][0]
    assert traces["task-0-1"] == statuses  # one stacked bar trace per status: shares sum to 1
    means = sql(demo_url, 'SELECT count("valid_reward_mean") > 0, count("draft_reward_mean") > 0, count("reward_best") > 0, '
                          'count("reward_node_mean") > 0 FROM "task_round_metrics" WHERE "run_id" = ? AND "task" = ?',
                run_id, tasks[0])[0]
    assert traces["task-0-4"] == sum(means)  # the reward means that have a value (no empty legend entry)
    assert traces["task-0-0"] == 1 and traces["task-0-3"] == 1  # reward boxes, response-length histogram
    # every panel's title is drawn above its plot, never under the mode bar
    assert browser.execute_script("""
        return Array.from(document.querySelectorAll('.chart')).every((el) => {
          const title = el.parentNode.querySelector('.chart-title');
          const bar = el.querySelector('.modebar');
          return title && (!bar || title.getBoundingClientRect().bottom <= bar.getBoundingClientRect().top + 1);
        });""")
    phases = sql(demo_url, 'SELECT count(*) FROM "round_metrics" WHERE "run_id" = ? AND "total_s" IS NOT NULL', run_id)
    assert (traces["phases"] > 0) == (phases[0][0] > 0)


def test_run_page_redraws_after_a_round_lands(browser, server, demo_url, shots):
    from selenium.webdriver.support.ui import WebDriverWait

    run_id, tasks = a_run(demo_url)
    load(browser, f"{server}/runs/{run_id}", shots, "run_before")
    rounds = int(browser.execute_script("return document.getElementById('run-summary').dataset.rounds"))
    last = sql(demo_url, 'SELECT max("round") FROM "nodes" WHERE "run_id" = ?', run_id)[0][0]
    add_round(demo_url, run_id, tasks, last + 1)
    # read inside the page, in one script: the redraw replaces these elements, and a reference
    # found by one call and read by the next can be stale in between (a clean run failed so)
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(
        "const e = document.getElementById('run-summary'); return e && e.dataset.rounds") == str(rounds + 1))
    WebDriverWait(browser, 30).until(lambda d: last + 1 in d.execute_script(
        "const e = document.getElementById('task-0-1'); return e && e.data ? e.data[0].x : []"))
    browser.save_screenshot(str(shots / "run_after_new_round.png"))
    assert "updated" in browser.execute_script("return document.getElementById('live-status').textContent")
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_compare_page(browser, server, demo_url, shots):
    runs = [r for (r,) in sql(demo_url, 'SELECT "run_id" FROM "task_round_metrics" GROUP BY 1 '
                                        'HAVING count(DISTINCT "round") > 1 ORDER BY 1 LIMIT 3')]
    query = "&".join(f"run={r}" for r in runs)
    assert load(browser, f"{server}/compare?{query}", shots, "compare") == []
    assert chart_traces(browser) == {"compare": 5 * len(runs)}  # 5 panels on one round axis
    assert rows(browser, "decision-table") == len(runs)


def test_quality_and_node_pages(browser, server, demo_url, shots):
    assert load(browser, server + "/quality", shots, "quality", charts=False) == []
    assert rows(browser, "violations-table") == sql(demo_url, 'SELECT count(*) FROM "invariant_violations"')[0][0]
    link = browser.find_element("css selector", "a.node-link")
    node_id = link.text
    link.click()
    assert browser.find_element("tag name", "h1").text == f"Node {node_id}"
    for element in ("plan", "code", "term-tail"):
        assert browser.find_element("id", element).text
    browser.save_screenshot(str(shots / "node.png"))
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_reward_model_run_page(browser, server, demo_url, shots):
    run_id = sql(demo_url, 'SELECT "run_id" FROM "rm_runs" LIMIT 1')[0][0]
    assert load(browser, f"{server}/runs/{run_id}", shots, "reward_model_run") == []
    traces = chart_traces(browser)
    assert traces["rm-proxy-final"] == 2  # the artifacts and the final = proxy diagonal
    assert traces["rm-formal"] >= 1
    assert rows(browser, "rm-evaluations") == sql(
        demo_url, 'SELECT count(*) FROM "rm_evaluations" WHERE "run_id" = ?', run_id)[0][0]


# --- the runs table's metric columns and grouping, the run headline, the phase chart ----------

METRICS = ("valid_reward_mean_latest", "valid_reward_mean_best", "valid_rate", "reward_best", "loss_latest")


def test_runs_table_metric_columns_sort_by_value_and_group(browser, server, demo_url, shots):
    from selenium.webdriver.support.ui import Select

    load(browser, server + "/", shots, "runs_metrics", charts=False)
    # every metric column is shown, each run's value run_metrics'
    want = {r[0]: r[1:] for r in sql(demo_url, f'SELECT "run_id", {", ".join(METRICS)} FROM "run_metrics"')}
    shown = browser.execute_script("""const cols = arguments[0];
        return Object.fromEntries(Array.from(document.querySelectorAll('#runs-table tbody tr')).map((r) =>
          [r.dataset.run, cols.map((c) => { const td = r.querySelector(`[data-col="${c}"]`);
                                            return td.hidden ? 'hidden' : td.dataset.value; })]));""", list(METRICS))
    assert set(shown) == set(want)
    for run_id, values in want.items():
        assert [None if v == "" else pytest.approx(float(v)) for v in shown[run_id]] == list(values), run_id
    # sorting by the best round's reward puts the best run first (empty cells last)
    browser.find_element("css selector", '#runs-table th[data-col="valid_reward_mean_best"]').click()
    best = [v for v in column(browser, "valid_reward_mean_best") if v != ""]
    assert [float(v) for v in best] == sorted((float(v) for v in best), reverse=True)
    assert float(best[0]) == pytest.approx(max(v[1] for v in want.values() if v[1] is not None))
    # group by arm with the form: one row per arm, its runs and its best, as SQL groups them
    Select(browser.find_element("id", "group-by")).select_by_value("arm")
    browser.find_element("css selector", "form.filters button[type=submit]").click()
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 30).until(lambda d: d.find_elements("id", "groups-table"))
    assert "group=arm" in browser.current_url
    groups = sql(demo_url, 'SELECT coalesce("arm", \'\'), count(*), max("valid_reward_mean_best") FROM "run_metrics" GROUP BY 1')
    got = browser.execute_script("""return Array.from(document.querySelectorAll('#groups-table tbody tr')).map((r) =>
        [r.dataset.key, Number(r.querySelector('[data-col="runs"]').dataset.value),
         r.querySelector('[data-col="best-valid_reward_mean_best"]').dataset.value]);""")
    assert sorted((k, n) for k, n, _ in got) == sorted((k, n) for k, n, _ in groups)
    best_of = {k: b for k, _, b in groups}
    for key, _, best_value in got:
        assert (best_value == "") if best_of[key] is None else float(best_value) == pytest.approx(best_of[key])
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 1400
    assert browser.execute_script("return Array.from(document.querySelectorAll('.table-wrap'))"
                                  ".every((w) => w.scrollWidth <= w.clientWidth)")  # both tables fit 1,400 px
    browser.save_screenshot(str(shots / "runs_grouped.png"))
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_run_headline_is_above_the_fold_and_the_header_says_the_runs_state(browser, server, demo_url, shots):
    from datetime import datetime

    from warehouse.db import connect

    run_id, _ = a_run(demo_url)
    load(browser, f"{server}/runs/{run_id}", shots, "run_headline")
    rounds = sql(demo_url, 'SELECT count(*), count("valid_reward_mean"), count("valid_rate") FROM "round_metrics" '
                           'WHERE "run_id" = ? AND "nodes" > 0', run_id)[0]
    assert rounds[1] > 1
    assert chart_traces(browser)["headline"] == 3  # valid_reward_mean, reward_best, valid_rate
    assert browser.execute_script("return document.getElementById('headline').data[0].x.length") == rounds[0]
    top = browser.execute_script("return document.getElementById('headline').getBoundingClientRect().bottom")
    assert top <= browser.execute_script("return window.innerHeight")  # seen without scrolling
    state = sql(demo_url, 'SELECT "state" FROM "run_state" WHERE "run_id" = ?', run_id)[0][0]
    assert browser.find_element("id", "live-status").text.split(",")[0] == state
    # a run that finished: its header says so, and the page stops polling
    ended = sql(demo_url, 'SELECT "run_id" FROM "run_metrics" WHERE "rounds" > 0 AND "run_id" <> ? ORDER BY 1 LIMIT 1',
                run_id)[0][0]
    # the live page polls the server every second, and each poll holds the file open: leave the
    # page, then write as a writer does, waiting for the lock (a plain connect failed when a
    # poll was in flight)
    browser.get("about:blank")
    with connect(demo_url) as con:
        con.execute('INSERT INTO "run_lifecycle" ("run_id", "trainer", "started_at", "ended_at", "end_status") '
                    "VALUES (?, 'train run', ?, ?, 'finished')", [ended, datetime(2026, 1, 1), datetime(2026, 1, 1, 1)])
    load(browser, f"{server}/runs/{ended}", shots, "run_finished")
    assert browser.find_element("id", "live-status").text == "finished"
    assert browser.find_element("css selector", "#run-life .badge").text == "finished"
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_phase_chart_draws_generation_and_execution_apart_with_their_overlap(browser, server, demo_url, shots):
    run_id = sql(demo_url, 'SELECT "run_id" FROM "round_metrics" WHERE "gen_overlap_s" > 0 ORDER BY 1 LIMIT 1')[0][0]
    load(browser, f"{server}/runs/{run_id}", shots, "run_phases")
    names = browser.execute_script("return document.getElementById('phases').data.map((t) => t.name)")
    assert {"generation", "generation ∥ execution", "execution"} <= set(names)
    drawn = browser.execute_script("""const el = document.getElementById('phases');
        return el.querySelectorAll('.cartesianlayer .trace').length;""")
    assert drawn == len(names)
    overlap = sql(demo_url, 'SELECT "gen_overlap_s" FROM "round_metrics" WHERE "run_id" = ? AND "total_s" IS NOT NULL '
                            'ORDER BY "round"', run_id)
    got = browser.execute_script("""const el = document.getElementById('phases');
        return el.data.find((t) => t.name === 'generation ∥ execution').y;""")
    assert got == pytest.approx([v or 0.0 for (v,) in overlap])
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_quality_page_opens_every_expectation_with_its_result(browser, server, demo_url, shots):
    from selenium.webdriver.support.ui import WebDriverWait

    load(browser, server + "/quality", shots, "quality_short", charts=False)
    browser.find_element("id", "every-expectation").click()
    WebDriverWait(browser, 120).until(lambda d: d.find_elements("id", "expectations-table"))
    results = browser.execute_script("return Array.from(document.querySelectorAll('#expectations-table tbody tr'))"
                                     ".map((r) => r.dataset.result)")
    verdict = browser.find_element("id", "expectations-verdict")
    assert len(results) == int(verdict.get_attribute("data-total")) > 30
    assert results.count("pass") == int(verdict.get_attribute("data-passed")) > 0 and "fail" in results
    browser.save_screenshot(str(shots / "quality_expectations.png"))
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
