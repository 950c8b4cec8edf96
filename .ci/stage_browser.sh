#!/usr/bin/env bash
# CI stage: the dashboard in a real browser. Installs Debian's chromium and chromium-driver
# (idempotent: skipped when both are there), then runs the headless-Chromium tests of
# `warehouse serve` against the demo warehouse. Screenshots land in $BROWSER_SCREENSHOTS.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
if ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
    echo "::: installing chromium and chromium-driver (Debian packages)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
fi
chromium --version
. .venv/bin/activate
export BROWSER_SCREENSHOTS="${BROWSER_SCREENSHOTS:-$(mktemp -d)/screenshots}"
# -rs: a skip here would mean the browser is missing, so fail on any skip instead
python -m pytest -q -x -rs tests/warehouse/serve/test_browser.py -p no:cacheprovider 2>&1 | tee /tmp/stage_browser.log
if grep -q " skipped" /tmp/stage_browser.log; then
    echo "::: browser tests were skipped: chromium is not usable" >&2
    exit 1
fi
echo "::: browser stage took $((SECONDS - started)) s (screenshots: $BROWSER_SCREENSHOTS)"
