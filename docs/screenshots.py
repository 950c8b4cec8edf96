"""Regenerate the README's dashboard screenshots (docs/img/) with headless Chromium.

    python docs/screenshots.py --db warehouse.duckdb [--run RUN] [--compare RUN_A,RUN_B] [--out docs/img]

Starts `warehouse serve` on a free port, opens the run page and the compare page in Debian's
chromium (through /usr/bin/chromedriver; nothing is downloaded) and saves one PNG of each.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--run", help="the run page of this run -> run_page.png")
    parser.add_argument("--compare", help="comma-separated run ids -> compare_page.png")
    parser.add_argument("--out", default="docs/img")
    parser.add_argument("--size", default="1280,1000")
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, "-m", "warehouse.cli", "--db", args.db, "serve", "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    base = re.search(r"at (http://\S+?)/? ", server.stdout.readline()).group(1)
    driver = _driver(args.size)
    try:
        pages = [("run_page", f"{base}/runs/{args.run}")] if args.run else []
        if args.compare:
            pages.append(("compare_page", f"{base}/compare?" + "&".join(f"run={r}" for r in args.compare.split(","))))
        for name, url in pages:
            driver.get(url)
            _wait_drawn(driver)
            path = Path(args.out) / f"{name}.png"
            driver.save_screenshot(str(path))
            print(path)
    finally:
        driver.quit()
        server.terminate()


def _driver(size: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--hide-scrollbars", f"--window-size={size}", f"--user-data-dir={tempfile.mkdtemp()}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def _wait_drawn(driver) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.drawn"))


if __name__ == "__main__":
    main()
