#!/usr/bin/env bash
# CI stage: the node sandbox attacked from a non-editable install (tests/train/env/test_env_hostile.py
# pip-installs this checkout, not editable, into a fresh venv and runs the hostile solutions
# through `train env check`), and the per-node limits, also under an artificial CPU load.
# Self-installing: bubblewrap from apt, and the README's venv when .ci/run has not made it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 ROLLOUT_REQUIRE_ISOLATION=1

command -v bwrap >/dev/null || { apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; }
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
    .venv/bin/pip install -q torch==2.13.0 -e ".[train,dev]"
fi
. .venv/bin/activate
echo "::: sandbox: hostile solutions from a non-editable install, limits, verdicts under load"
python -m pytest -q -p no:cacheprovider tests/train/env/test_env_hostile.py tests/train/env/test_env_fallback.py \
    tests/train/env/test_env_limits.py
