#!/usr/bin/env bash
# CI stage: the shared engine. Installs PostgreSQL from Debian's packages, starts a throwaway
# cluster on a local socket (no TCP), runs the concurrency test and the export round trip
# (train run, train rm, export, restore) against ducklake:postgres: warehouses, then opens a
# fresh warehouse file with the BI clients' DuckDB (the duckdb-cli 1.5.6 and Python's duckdb
# 1.4, in a side venv) and reads every view.
# Self-installing and idempotent; run as root from the repository root after the main job
# (it uses .venv). Prints its own elapsed seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    echo "::: ducklake stage: apt-get install postgresql"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
pgbin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
work="$(mktemp -d)"
chmod 755 "$work"
mkdir "$work/data" "$work/sock" "$work/log"
chown postgres "$work/data" "$work/sock" "$work/log"
as_pg() { runuser -u postgres -- "$@"; }
port=54329
as_pg "$pgbin/initdb" -D "$work/data" -A trust -U postgres >/dev/null
as_pg "$pgbin/pg_ctl" -D "$work/data" -l "$work/log/pg.log" -w \
    -o "-c listen_addresses='' -c unix_socket_directories='$work/sock' -p $port" start >/dev/null
trap 'as_pg "$pgbin/pg_ctl" -D "$work/data" -m fast stop >/dev/null 2>&1 || true' EXIT
for db in ducklake ducklake_rt_trained ducklake_rt_restored; do  # the last two: tests/test_round_trip.py
    as_pg "$pgbin/createdb" -h "$work/sock" -p "$port" "$db"
done
export ROLLOUT_TEST_PG_CONNINFO="dbname=ducklake host=$work/sock port=$port user=postgres"
echo "::: ducklake stage: PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') on $work/sock"

echo "::: ducklake stage: BI clients' DuckDB in a side venv (duckdb 1.4, duckdb-cli 1.5.6)"
side="$work/bi-venv"
python3 -m venv "$side"
"$side/bin/pip" install -q "duckdb>=1.4,<1.5" "duckdb-cli==1.5.6" 2>&1 | grep -v "^WARNING: Location" || true
export ROLLOUT_TEST_BI_PYTHON="$side/bin/python" ROLLOUT_TEST_BI_CLI="$side/bin/duckdb"

echo "::: ducklake stage: concurrency and the export round trip on a PostgreSQL catalog, BI clients on a fresh file"
.venv/bin/python -m pytest -q -p no:cacheprovider \
    "tests/warehouse/test_concurrency.py::test_ducklake_takes_four_trainers_two_ingests_and_a_reader_at_once[postgres]" \
    "tests/test_round_trip.py::test_train_run_and_train_rm_exported_and_restored_give_back_every_table[postgres]" \
    tests/warehouse/test_bi_clients.py
echo "::: ducklake stage passed in $((SECONDS - start)) s"
