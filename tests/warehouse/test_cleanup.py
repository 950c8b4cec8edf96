"""Parquet files left by a DuckLake writer killed with -9 during a commit: `warehouse cleanup`
finds and deletes exactly those (DuckLake's ducklake_delete_orphaned_files), never a file a
snapshot references, and the next ingest lands every row once.

The writer is a real `warehouse ingest` process killed with SIGKILL at a fixed point of its
node transaction: after the nodes and payloads are written as Parquet, before the commit (a
hook in its own process tells the test when it is there), so the test does not race it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from warehouse.cli import main
from warehouse.config import resolve_db_url

REPO = Path(__file__).resolve().parents[2]

KILL_POINT = """
import pathlib, sys, time
import ingest.load as load

written = load.insert_nodes

def insert_then_wait(*args, **kwargs):
    written(*args, **kwargs)          # the Parquet files are on disk, the commit not yet made
    pathlib.Path(sys.argv[1]).touch()
    time.sleep(600)

load.insert_nodes = insert_then_wait
from warehouse.cli import main
main(sys.argv[2:])
"""



def cli(url: str, *args: str):
    return CliRunner().invoke(main, ["--db", url, *args])


def parquet_files(data_path: Path) -> set[str]:
    return {str(p) for p in data_path.rglob("*.parquet")}


def referenced_files(url: str) -> set[str]:
    """Every data and delete file the catalog knows (of any snapshot)."""
    from warehouse.db import connect

    with connect(url, read_only=True) as con:
        files = []
        data_path = con.execute("SELECT data_path FROM ducklake_settings('wh')").fetchone()[0]
        meta = "__ducklake_metadata_wh"
        schema_path = dict(con.execute(f"SELECT schema_id, path FROM {meta}.ducklake_schema").fetchall())
        table_path = {t: (schema_path[s], p) for t, s, p in con.execute(
            f"SELECT table_id, schema_id, path FROM {meta}.ducklake_table").fetchall()}
        for kind in ("ducklake_data_file", "ducklake_delete_file"):
            for table_id, path, relative in con.execute(
                    f"SELECT table_id, path, path_is_relative FROM {meta}.{kind}").fetchall():
                schema, table = table_path[table_id]
                files.append(data_path + schema + table + path if relative else path)
        return set(files)


def kill_mid_commit(url: str, root: Path, tmp_path: Path) -> None:
    mark = tmp_path / "in_commit"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", KILL_POINT, str(mark), "--db", url, "ingest", "-q",
                             str(root)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not mark.exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the ingest never reached its node commit"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


def counts(url: str) -> dict:
    from warehouse.db import connect

    with connect(url, read_only=True) as con:
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                for t in ("sources", "nodes", "node_payloads", "task_rounds", "ingest_errors")}


def test_cleanup_deletes_the_parquet_of_a_writer_killed_mid_commit(small_sample_root, tmp_path):
    url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'cat.sqlite'}", tmp_path / "files")
    assert cli(url, "init").exit_code == 0
    kill_mid_commit(url, small_sample_root, tmp_path)

    orphans = parquet_files(tmp_path / "files") - referenced_files(url)
    assert orphans, "the killed commit left no Parquet behind: the test does not test anything"
    kept = cli(url, "cleanup")  # the default age spares files a running writer may still commit
    assert kept.exit_code == 0 and "Deleted 0 orphaned" in kept.output, kept.output
    listed = cli(url, "cleanup", "--older-than", "0", "--dry-run")
    assert set(listed.output.splitlines()[:-1]) == orphans, listed.output
    assert parquet_files(tmp_path / "files") >= orphans  # a dry run deletes nothing

    done = cli(url, "cleanup", "--older-than", "0")
    assert done.exit_code == 0, done.output
    assert f"Deleted {len(orphans)} orphaned" in done.output
    assert parquet_files(tmp_path / "files") == referenced_files(url)

    again = cli(url, "ingest", "-q", str(small_sample_root))  # the killed ingest's files land now, once
    assert again.exit_code in (0, 3), again.output
    reference = resolve_db_url(tmp_path / "reference.duckdb")
    assert cli(reference, "init").exit_code == 0
    assert cli(reference, "ingest", "-q", str(small_sample_root)).exit_code in (0, 3)
    assert counts(url) == counts(reference)
    assert parquet_files(tmp_path / "files") == referenced_files(url)
    assert cli(url, "cleanup", "--older-than", "0", "--dry-run").output.startswith("Would delete 0 orphaned")


def test_cleanup_on_a_file_has_nothing_to_do(db_url):
    result = cli(db_url, "cleanup", "--older-than", "0")
    assert result.exit_code == 0 and "nothing to clean" in result.output


def test_an_age_that_is_not_one_is_one_error_line(db_url):
    result = cli(db_url, "cleanup", "--older-than", "soon")
    assert result.exit_code == 1
    assert result.output.strip() == "Error: not an age: 'soon'. Use e.g. 90s, 30m, 1h or 2d."


def test_expired_snapshots_let_go_of_the_token_index_files_an_ingest_merged(tmp_path):
    """An ingest's batches each commit a token index write, merged into one at its end: the
    batches' files leave the lake's table but stay on disk while a snapshot reads them.
    `--expire-snapshots 0 --older-than 0` expires those snapshots and deletes exactly the
    files no remaining snapshot reads; the rows and the token search stay as they were."""
    from ingest.pipeline import ingest_roots
    from ingest.sample import write_sample_root
    from warehouse.db import connect
    from warehouse.tokens import search_token_nodes

    url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'cat.sqlite'}", tmp_path / "files")
    assert cli(url, "init").exit_code == 0
    root = write_sample_root(tmp_path / "root", payload_tokens=(20, 60))
    report = ingest_roots(url, [str(root)], batch_bytes=600_000)  # a token index write per batch
    assert report.files_failed == 0

    def current() -> set[str]:
        """The data and delete files of the newest snapshot, every table."""
        with connect(url, read_only=True) as con:
            tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() "
                                                "WHERE database_name = 'wh'").fetchall()]
            return {f for table in tables for row in con.execute(
                "SELECT data_file, delete_file FROM ducklake_list_files('wh', ?)", [table]).fetchall() for f in row if f}

    merged_away = parquet_files(tmp_path / "files") - current()
    assert any("/node_token_index/" in f for f in merged_away), "no batch file left the index: nothing to test"
    before = counts(url)
    with connect(url, read_only=True) as con:
        held = [t for (t,) in con.execute('SELECT DISTINCT "token_id" FROM "node_token_index" ORDER BY 1 LIMIT 5').fetchall()]
    found = [search_token_nodes(url, t).rows for t in held]

    kept = cli(url, "cleanup", "--older-than", "0")  # without expiring, every snapshot still reads them
    assert kept.exit_code == 0 and parquet_files(tmp_path / "files") >= merged_away, kept.output
    listed = cli(url, "cleanup", "--expire-snapshots", "0", "--older-than", "0", "--dry-run")
    assert listed.exit_code == 0 and "Would expire" in listed.output, listed.output
    assert parquet_files(tmp_path / "files") >= merged_away  # a dry run expires and deletes nothing
    done = cli(url, "cleanup", "--expire-snapshots", "0", "--older-than", "0")
    assert done.exit_code == 0 and "Expired" in done.output, done.output
    assert parquet_files(tmp_path / "files") == current()
    assert counts(url) == before
    assert [search_token_nodes(url, t).rows for t in held] == found
