"""The ingest, sample and demo commands through click's CliRunner: exit codes 0 / 3 / 1."""
from __future__ import annotations

import shutil

from click.testing import CliRunner

from tests.ingest.helpers import make_db, rows
from warehouse.cli import main


def _run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_every_ingest_command_has_help():
    for name in ("ingest", "sample", "demo"):
        result = _run(name, "--help")
        assert result.exit_code == 0
        assert len(main.commands[name].help or "") > 40, name
    assert "--manifest" in _run("ingest", "--help").output


def test_ingest_exit_0_when_everything_lands(small_root, tmp_path):
    url = make_db(tmp_path)
    result = _run("--db", url, "ingest", str(small_root))
    assert result.exit_code == 0, result.output
    assert "0 rejected" in result.output
    again = _run("--db", url, "ingest", "--quiet", str(small_root))
    assert again.exit_code == 0 and again.output == ""


def test_ingest_exit_3_when_lines_are_rejected(small_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(small_root, root)
    node_file = next(root.glob("20260702_020809/round_1/*__[0-9]*[0-9].jsonl"))
    with open(node_file, "a") as fh:
        fh.write('{"id": "abc", "reward": \n')
    url = make_db(tmp_path)
    result = _run("--db", url, "ingest", str(root))
    assert result.exit_code == 3
    assert f"{node_file}:65: truncated JSON" in result.output
    assert rows(url, "SELECT line_no FROM ingest_errors") == [(65,)]


def test_ingest_exit_1_on_a_real_failure(tmp_path):
    url = make_db(tmp_path)
    result = _run("--db", url, "ingest", str(tmp_path / "missing"))
    assert result.exit_code == 1
    assert "Error: data root" in result.output and "is not a directory" in result.output
    uninitialised = _run("--db", str(tmp_path / "new.duckdb"), "ingest", str(tmp_path))
    assert uninitialised.exit_code == 1 and "warehouse init" in uninitialised.output


def test_manifest_file_adds_and_overrides_runs(small_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(small_root, root)
    (root / "my_new_run" / "round_1").mkdir(parents=True)
    (root / "my_new_run" / "timing.jsonl").write_text('{"step": 1, "total_s": 1.0}\n')
    manifest = tmp_path / "runs.toml"
    manifest.write_text('question_id = "mine"\n'
                        '[runs.my_new_run]\narm = "hr24k"\nkind = "training"\n'
                        'resumed_from = { run = "20260719_045416_27b_mix4_hr", step = 2 }\n'
                        '[runs."20260702_020809"]\narm = "tree_grpo_9b_spooky"\nseed = 7\n')
    url = make_db(tmp_path)
    result = _run("--db", url, "ingest", "--manifest", str(manifest), str(root))
    assert result.exit_code == 0, result.output
    got = {r[0]: r[1:] for r in rows(url, "SELECT run_id, question_id, arm, resumed_from_run, "
                                          "resumed_from_step, seed FROM runs")}
    assert got["my_new_run"] == ("mine", "hr24k", "20260719_045416_27b_mix4_hr", 2, None)
    assert got["20260702_020809"][1:] == ("tree_grpo_9b_spooky", None, None, 7)
    # a manifest.toml inside the root is read without a flag
    shutil.move(manifest, root / "manifest.toml")
    (root / "my_new_run" / "timing.jsonl").write_text('{"step": 1, "total_s": 2.0}\n')
    url2 = make_db(tmp_path, "second.duckdb")
    assert _run("--db", url2, "ingest", str(root)).exit_code == 0
    assert rows(url2, "SELECT arm FROM runs WHERE run_id = 'my_new_run'") == [("hr24k",)]


def test_unknown_run_gets_a_warning_and_kind_from_its_name(small_root, tmp_path):
    root = tmp_path / "root"
    (root / "probe_something" / "round_0").mkdir(parents=True)
    (root / "smoke_x" / "round_0").mkdir(parents=True)
    (root / "not_a_run").mkdir()
    url = make_db(tmp_path)
    result = _run("--db", url, "ingest", str(root))
    assert result.exit_code == 0
    assert "run probe_something has no manifest entry" in result.output
    assert "not_a_run: not a run (no round_<N>/ or timing.jsonl inside)" in result.output
    assert rows(url, "SELECT run_id, kind, arm FROM runs ORDER BY 1") == [
        ("probe_something", "probe", None), ("smoke_x", "smoke", None)]


def test_bad_manifest_is_one_clear_error(tmp_path):
    manifest = tmp_path / "m.toml"
    manifest.write_text('[runs.x]\narm = "no_such_arm"\n')
    result = _run("--db", make_db(tmp_path), "ingest", "--manifest", str(manifest), str(tmp_path))
    assert result.exit_code == 1
    assert "unknown arm 'no_such_arm'" in result.output and str(manifest) in result.output


def test_sample_and_demo(tmp_path):
    result = _run("sample", str(tmp_path / "s"), "--seed", "2")
    assert result.exit_code == 0 and (tmp_path / "s" / "20260701_231713").is_dir()
    demo = _run("--db", str(tmp_path / "demo.duckdb"), "demo", "--out", str(tmp_path / "d"))
    assert demo.exit_code == 0, demo.output
    assert "LOST" in demo.output
    db = f"duckdb:///{tmp_path / 'demo.duckdb'}"
    assert rows(db, "SELECT count(*) FROM runs WHERE lost") == [(1,)]
    assert rows(db, "SELECT count(*) FROM nodes") == [(1124,)]


def test_an_empty_root_is_an_error_not_zero_runs(tmp_path):
    (tmp_path / "empty").mkdir()
    result = _run("--db", make_db(tmp_path), "ingest", str(tmp_path / "empty"))
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: no runs in {tmp_path / 'empty'}: a data root holds run folders")


def test_a_run_or_round_folder_given_for_its_root_names_the_root(small_root, tmp_path):
    url = make_db(tmp_path)
    run = small_root / "20260702_020809"
    result = _run("--db", url, "ingest", str(run))
    assert result.exit_code == 1
    assert result.output == (f"Error: {run} is a run folder, not a data root. Ingest the folder that "
                             f"holds it: warehouse ingest {small_root}\n")
    round_dir = _run("--db", url, "ingest", str(run / "round_1"))
    assert round_dir.exit_code == 1 and round_dir.output.endswith(f"warehouse ingest {small_root}\n")
    assert rows(url, "SELECT count(*) FROM runs") == [(0,)]  # nothing registered
