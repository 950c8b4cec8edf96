"""Regenerate the dashboard screenshots (docs/img/) with headless Chromium at 1,400 px.

    python docs/screenshots.py --db warehouse.duckdb --run RUN [--compare RUN_A,RUN_B] [--node RUN/NODE] [--out docs/img]

Starts `warehouse serve` on a free port, opens the runs page, the run page, its rollout
browser, a node page (its tree and token view) and the compare page in Debian's chromium
(through /usr/bin/chromedriver; nothing is downloaded) and saves one full-page PNG of each.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--run", help="the run page and rollout browser of this run")
    parser.add_argument("--compare", help="comma-separated run ids -> compare_page.png")
    parser.add_argument("--node", help="RUN/NODE_ID -> node_page.png (no node page without it)")
    parser.add_argument("--out", default="docs/img")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--max-height", type=int, default=2400, help="cut taller pages to this many pixels")
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, "-m", "warehouse.cli", "--db", args.db, "serve", "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    base = re.search(r"at (http://\S+?)/? ", server.stdout.readline()).group(1)
    driver = _driver(args.width)
    try:
        for name, url, charts in _pages(base, args):
            driver.get(url)
            if charts:
                _wait_drawn(driver)
            if name == "run_page":  # show the settings panel open
                driver.execute_script("const d = document.getElementById('settings'); if (d) d.open = true;")
            path = Path(args.out) / f"{name}.png"
            _full_page(driver, args.width, CUT.get(name, args.max_height))
            driver.save_screenshot(str(path))
            print(path)
    finally:
        driver.quit()
        server.terminate()


#: pages cut shorter than --max-height (a long table needs only its first screens)
CUT = {"nodes_page": 1100, "node_page": 1700}


def _pages(base: str, args) -> list[tuple[str, str, bool]]:
    pages = [("runs_page", f"{base}/", False)]
    if args.run:
        run = quote(args.run, safe="")
        pages += [("run_page", f"{base}/runs/{run}", True), ("nodes_page", f"{base}/runs/{run}/nodes?sort=-reward", False)]
    if args.node:
        run, node = args.node.rsplit("/", 1)
        pages.append(("node_page", f"{base}/runs/{quote(run, safe='')}/nodes/{quote(node, safe='')}", False))
    if args.compare:
        pages.append(("compare_page", f"{base}/compare?" + "&".join(f"run={r}" for r in args.compare.split(",")), True))
    return pages


def _driver(width: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--hide-scrollbars", f"--window-size={width},1000", f"--user-data-dir={tempfile.mkdtemp()}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def _full_page(driver, width: int, max_height: int) -> None:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(height, max_height))


def _wait_drawn(driver) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.drawn"))


if __name__ == "__main__":
    main()
