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
    assert traces["task-0-1"] == 4  # valid, crashed, no_code, timeout
    assert traces["task-0-4"] == 4  # the four reward means
    assert traces["task-0-0"] == 1 and traces["task-0-3"] == 1  # reward boxes, response-length histogram
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
