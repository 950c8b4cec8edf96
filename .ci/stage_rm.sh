#!/usr/bin/env bash
# CI stage (issue 17): `train rm --model tiny` on CPU end to end into a fresh warehouse, whose
# rows must pass the reward-model gate (checks 10-15), and its export must ingest cleanly.
# Idempotent: everything goes to a fresh temp directory. Prints its elapsed seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
. .venv/bin/activate
work="$(mktemp -d)"
warehouse --db "$work/rm.duckdb" init
train rm --model tiny --device cpu --db "$work/rm.duckdb" --run-id ci_rm --out-dir "$work/out" \
    --export-root "$work/export" --set max_steps=32 --set save_at=16
warehouse --db "$work/rm.duckdb" check --run ci_rm
warehouse --db "$work/ingested.duckdb" init
warehouse --db "$work/ingested.duckdb" ingest "$work/export"
warehouse --db "$work/ingested.duckdb" check --run ci_rm
rm -rf "$work"
echo "::: stage_rm: $((SECONDS - start)) s"
