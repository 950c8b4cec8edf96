"""`train rm` through the CLI: `--model tiny` end to end into a warehouse whose rows pass the
reward-model gate, the export that ingests to the same rows, and one-line errors."""
from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from train.cli import main

SMALL = ["--set", "grad_accum=2", "--set", "max_steps=4", "--set", "save_at=2", "--set", "lr=3e-3",
         "--set", "lora_rank=8", "--set", "lora_alpha=16", "--set", "max_length=96", "--device", "cpu"]
COMPARED = {"rm_runs": None, "rm_jobs": None, "rm_steps": None, "rm_artifacts": None, "rm_evaluations": None,
            "rm_eval_sections": None, "rm_budgets": None}
NOT_COMPARED = {"source_id", "line_no", "summary_path", "receipt_path", "summary_sha256", "summary_size",
                "receipt_sha256", "receipt_size"}


def rows(url: str, table: str, run_id: str) -> list:
    from warehouse.db import connect

    with connect(url, read_only=True) as con:
        columns = [d[0] for d in con.execute(f'SELECT * FROM "{table}" LIMIT 0').description]
        keep = ", ".join(f'"{c}"' for c in columns if c not in NOT_COMPARED)
        return con.execute(f'SELECT {keep} FROM "{table}" WHERE "run_id" = ? ORDER BY ALL', [run_id]).fetchall()


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("TRAIN_TINY_POLICY_DIR"),
                    reason="needs the tiny policy: set TRAIN_TINY_POLICY_DIR (CI does)")
def test_train_rm_tiny_lands_rows_that_pass_the_gate_and_its_export_ingests_to_the_same_rows(
        db_url, small_eval, tmp_path, template_db):
    import shutil

    from ingest.pipeline import ingest_roots
    from warehouse.quality.runner import run_checks

    db = db_url.removeprefix("duckdb:///")
    result = CliRunner().invoke(main, ["rm", "--model", "tiny", "--eval", str(small_eval), "--proxy-rows", "32",
                                       "--db", db, "--run-id", "rm_cli", "--out-dir", str(tmp_path / "out"),
                                       "--export-root", str(tmp_path / "export"), *SMALL])
    assert result.exit_code == 0, result.output
    assert "Done: run rm_cli, 4 step(s), 1 member(s), stop completed, best final" in result.output
    assert len(rows(db_url, "rm_steps", "rm_cli")) == 4
    assert [r[2] for r in rows(db_url, "rm_artifacts", "rm_cli")] == [2, 4]  # progress
    splits = sorted((e[5], e[6]) for e in rows(db_url, "rm_evaluations", "rm_cli"))
    assert len(splits) == 6
    report = run_checks(db_url, run="rm_cli")
    assert report.success, [o.description for o in report.failed]
    from warehouse.rm_report import write_rm_report

    page = write_rm_report(db_url, "rm_cli", tmp_path / "report").read_text()
    assert "formal_p00004_full" in page and "Chat Hard" in page and (tmp_path / "report" / "scores_by_progress.png").is_file()

    other = tmp_path / "other.duckdb"
    shutil.copyfile(template_db, other)
    ingest_roots(f"duckdb:///{other}", [tmp_path / "export"])
    for table in COMPARED:
        assert rows(f"duckdb:///{other}", table, "rm_cli") == rows(db_url, table, "rm_cli"), table


def test_overlapping_pairs_are_one_error_line(tmp_path, db_url):
    from train.rm import synthetic

    first_eval = synthetic.EVAL_FILE.read_text().splitlines()[0]
    (tmp_path / "pairs.jsonl").write_text(first_eval + "\n")
    result = CliRunner().invoke(main, ["rm", "--pairs", str(tmp_path / "pairs.jsonl"), "--no-db", *SMALL])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1].startswith("Error: 1 training pair(s) share their prompt")
    assert "pairs.jsonl:1" in result.output and "Traceback" not in result.output


def test_an_unknown_setting_is_one_error_line():
    result = CliRunner().invoke(main, ["rm", "--no-db", "--set", "lerning_rate=1"])
    assert result.exit_code == 1 and "Error: --set lerning_rate: not a reward-model setting" in result.output
