"""A fresh warehouse file opens in the DuckDB that BI tools carry, and every view reads.

BI tools bring their own DuckDB, older than ours: the DuckDB CLI on PyPI (`duckdb-cli`
1.5.6) and Python's `duckdb` 1.4 here. CI installs both in a side venv
(.ci/stage_ducklake.sh) and names them in $ROLLOUT_TEST_BI_PYTHON and $ROLLOUT_TEST_BI_CLI.
Each must count every view's rows as our own connection does.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from warehouse.config import resolve_db_url

COUNT_VIEWS = r"""
import json, sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
views = [v for (v,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
print(json.dumps({"version": duckdb.__version__,
                  "counts": {v: con.execute(f'SELECT count(*) FROM "{v}"').fetchone()[0] for v in views}}))
"""


@pytest.fixture(scope="module")
def demo_warehouse(tmp_path_factory) -> tuple[str, dict]:
    """`warehouse demo` into a new file, and its views' row counts read by our own DuckDB."""
    from click.testing import CliRunner

    from warehouse.cli import main
    from warehouse.migrate import view_files
    from warehouse.query import run_query

    tmp = tmp_path_factory.mktemp("bi")
    path = tmp / "wh.duckdb"
    result = CliRunner().invoke(main, ["--db", str(path), "demo", "--quiet", "--out", str(tmp / "root")])
    assert result.exit_code == 0, result.output
    url = resolve_db_url(path)
    counts = {name: run_query(url, f'SELECT count(*) FROM "{name}"').rows[0][0] for name, _ in view_files()}
    return str(path), counts


def _client(env_var: str) -> str:
    value = os.environ.get(env_var)
    if not value:
        pytest.skip(f"${env_var} is not set (CI's .ci/stage_ducklake.sh installs the BI clients)")
    return value


def test_python_duckdb_1_4_reads_every_view(demo_warehouse):
    path, ours = demo_warehouse
    out = subprocess.run([_client("ROLLOUT_TEST_BI_PYTHON"), "-c", COUNT_VIEWS, path],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    theirs = json.loads(out.stdout)
    assert theirs["version"].startswith("1.4.")
    assert theirs["counts"] == ours


def test_duckdb_cli_1_5_6_reads_every_view(demo_warehouse):
    path, ours = demo_warehouse
    cli = _client("ROLLOUT_TEST_BI_CLI")
    version = subprocess.run([cli, "--version"], capture_output=True, text=True, timeout=60).stdout
    assert version.startswith("v1.5.6"), version
    sql = " UNION ALL ".join(f"SELECT '{name}' AS v, count(*) AS n FROM \"{name}\"" for name in ours)
    out = subprocess.run([cli, "-readonly", "-json", path, "-c", sql], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert {row["v"]: row["n"] for row in json.loads(out.stdout)} == ours
