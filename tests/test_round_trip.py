"""Every row the trainers write, exported and restored: the same warehouse, table by table.

Two rounds of `train run` (learning on: rounds, nodes, payloads, steps and step_metrics) and a
`train rm` run (rm_* rows, artifacts and evaluations), each with its run_lifecycle row, write
into a warehouse; `warehouse export` writes it as Parquet with its manifest; `warehouse ingest`
of the export into a fresh warehouse restores it, and every table holds the same rows. On the
file, on DuckLake with a SQLite catalog, and on DuckLake with a PostgreSQL catalog where
$ROLLOUT_TEST_PG_CONNINFO names a server (.ci/stage_ducklake.sh starts one and makes the two
databases used here; the test empties them first, so it can run again).

The models are built in the session (a 2-layer policy, the canned backend of
tests/train/test_run.py; the 2-layer reward-model base of tests/train/rm), so the whole test
takes seconds per backend on a CPU.
"""
from __future__ import annotations

import os
import re

import pytest
from click.testing import CliRunner

from tests.train.rollout.conftest import tiny_model, tiny_tokenizer  # noqa: F401 - shared fixtures
from tests.train.test_run import TASK, CannedBackend

PG_ENV = "ROLLOUT_TEST_PG_CONNINFO"
RM_SETS = ["--set", "grad_accum=2", "--set", "max_steps=4", "--set", "save_at=2", "--set", "lr=3e-3",
           "--set", "lora_rank=8", "--set", "lora_alpha=16", "--set", "max_length=64", "--device", "cpu"]


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory, tiny_model, tiny_tokenizer):
    path = tmp_path_factory.mktemp("policy")
    tiny_model.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def rm_base(tmp_path_factory):
    from tests.train.rm.conftest import build_tiny_base

    return build_tiny_base(tmp_path_factory.mktemp("rm_base"))


@pytest.fixture
def eval_rows(tmp_path):
    """16 bundled evaluation rows, 4 per section: scoring stays quick."""
    import json

    from train.rm import synthetic

    rows = [json.loads(line) for line in synthetic.EVAL_FILE.read_text().splitlines()]
    picked = [r for s in ("Chat", "Chat Hard", "Safety", "Reasoning") for r in [x for x in rows if x["section"] == s][:4]]
    path = tmp_path / "eval.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in picked))
    return path


def _urls(backend: str, tmp_path) -> tuple[str, str]:
    """(the trainers' warehouse, the fresh one the export is restored into), both initialized."""
    from warehouse.config import resolve_db_url
    from warehouse.migrate import init_db

    if backend == "file":
        urls = tuple(f"duckdb:///{tmp_path / name}.duckdb" for name in ("trained", "restored"))
    elif backend == "sqlite":
        urls = tuple(resolve_db_url(f"ducklake:sqlite:{tmp_path / name}.sqlite", tmp_path / f"{name}_files")
                     for name in ("trained", "restored"))
    else:
        conninfo = os.environ.get(PG_ENV)
        if not conninfo:
            pytest.skip(f"needs a PostgreSQL server: set {PG_ENV} (.ci/stage_ducklake.sh does)")
        databases = [_database(conninfo, f"ducklake_rt_{name}") for name in ("trained", "restored")]
        for database in databases:
            _empty(database)
        urls = tuple(resolve_db_url(f"ducklake:postgres:{database}", tmp_path / f"{name}_files")
                     for database, name in zip(databases, ("trained", "restored")))
    for url in urls:
        init_db(url)
    return urls


def _database(conninfo: str, name: str) -> str:
    """The conninfo with another database name (the stage makes ducklake_rt_trained and _restored)."""
    rest = re.sub(r"\bdbname=\S+", "", conninfo).strip()
    return f"dbname={name} {rest}"


def _empty(conninfo: str) -> None:
    """Drop what an earlier run of this test left in the database (its DuckLake catalog)."""
    import duckdb

    from warehouse.db import extension_file

    con = duckdb.connect(config={"autoinstall_known_extensions": False})
    try:
        con.execute(f"LOAD '{extension_file('postgres_scanner')}'")
        con.execute(f"ATTACH '{conninfo}' AS pg (TYPE postgres)")
        con.execute("CALL postgres_execute('pg', 'DROP SCHEMA public CASCADE; CREATE SCHEMA public')")
    finally:
        con.close()


#: The token index's entries (token id, source_id, line_no), whatever writes hold them: a
#: trainer writes one a round, a restore one for all (warehouse/tokens.py).
INDEX_ENTRIES = ('SELECT "token_id", "source_id", "line_no" FROM (SELECT "write_id", "token_id", '
                 'unnest("source_ids") AS "source_id", unnest("line_nos") AS "line_no" FROM "node_token_index") '
                 'JOIN "node_token_index_writes" USING ("write_id", "source_id") ORDER BY ALL')


def _tables(url: str) -> dict:
    """Every table's rows, in a stable order; the token index as its entries."""
    from warehouse.db import connect
    from warehouse.schema import TABLE_NAMES

    derived = {"node_token_index": INDEX_ENTRIES,
               "node_token_index_writes": 'SELECT "source_id" FROM "node_token_index_writes" ORDER BY ALL'}
    with connect(url, read_only=True) as con:
        return {t: con.execute(derived.get(t, f'SELECT * FROM "{t}" ORDER BY ALL')).fetchall() for t in TABLE_NAMES}


@pytest.mark.parametrize("backend", ["file", "sqlite", "postgres"])
def test_train_run_and_train_rm_exported_and_restored_give_back_every_table(
        backend, tmp_path, monkeypatch, policy_dir, rm_base, eval_rows):
    from train.cli import main as train_main
    from warehouse.cli import main as warehouse_main

    trained, restored = _urls(backend, tmp_path)
    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer))
    runner = CliRunner()
    # --no-health-gate: the round trip is this test's subject, and every round's rows are written
    # whatever its nodes did (both canned nodes can fail, and the gate would then stop the run)
    result = runner.invoke(train_main, ["run", "--model", str(policy_dir), "--rounds", "2", "--tasks", TASK,
                                        "--no-health-gate",
                                        "--db", trained, "--set", "siblings_per_expansion=2", "--run-id", "rt_run",
                                        "--spool-root", str(tmp_path / "spool")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(train_main, ["rm", "--model", str(rm_base), "--eval", str(eval_rows), "--proxy-rows", "8",
                                        "--db", trained, "--run-id", "rt_rm", "--out-dir", str(tmp_path / "rm_out"),
                                        *RM_SETS])
    assert result.exit_code == 0, result.output
    result = runner.invoke(warehouse_main, ["--db", trained, "export", str(tmp_path / "export")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(warehouse_main, ["--db", restored, "ingest", str(tmp_path / "export")])
    assert result.exit_code == 0, result.output

    want, got = _tables(trained), _tables(restored)
    written = {t for t, rows in want.items() if rows}
    assert {"runs", "rounds", "task_rounds", "sibling_groups", "nodes", "node_payloads", "node_train_tokens", "steps", "step_metrics",
            "sources", "rm_runs", "rm_jobs", "rm_steps", "rm_artifacts", "rm_evaluations", "rm_eval_sections",
            "rm_budgets", "run_lifecycle"} <= written
    assert len(want["step_metrics"]) == 2 and len(want["rm_steps"]) == 4
    assert sorted((row[0], row[6]) for row in want["run_lifecycle"]) == [("rt_rm", "finished"), ("rt_run", "finished")]
    assert {t: len(rows) for t, rows in got.items()} == {t: len(rows) for t, rows in want.items()}
    for table in want:
        assert got[table] == want[table], table
