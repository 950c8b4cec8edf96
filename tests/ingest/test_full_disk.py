"""The disk under the warehouse fills during `warehouse ingest`, on both engines: the ingest
stops at the first ENOSPC with one `Error:` line naming the file it stopped at, where the
space ran out and how much is free; that file's transaction is rolled back, the files
committed before it stay, nothing is recorded as a rejected file, and once there is space
the next ingest lands the rest, every row once.

The full disk is a small tmpfs in a private mount namespace (tests/mounts.py) holding the
warehouse file, or a DuckLake's data path (its catalog stays on the real disk). Before the
namespace ends its content is copied onto the real disk under the same path, so the test
reads and continues the warehouse the ingest left."""
from __future__ import annotations

import shlex
import sys

import pytest
from click.testing import CliRunner

from tests.mounts import require_mounts, run_script
from warehouse.cli import main
from warehouse.config import resolve_db_url

#: Sizes between what `init` and the rendered files' commit need and what the root's node
#: files need (file: every commit of an ingest checkpoints into the file, no WAL: the rendered
#: files' commit fits from 7 MB, the whole root from 12 MB; DuckLake's data path: nothing,
#: then 0.6 MB of Parquet), so the disk fills at the node files.
TMPFS_KB = {"file": 9000, "ducklake": 300}



def cli(url: str, *args: str):
    return CliRunner().invoke(main, ["--db", url, *args])


def counts(url: str) -> dict:
    from warehouse.db import connect

    with connect(url, read_only=True) as con:
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                for t in ("sources", "nodes", "node_payloads", "task_rounds", "ingest_errors")}


def ingest_on_a_full_disk(engine: str, tmp_path, root) -> tuple[str, int, str]:
    """(url, exit code, stderr) of init + ingest with the small disk mounted."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if engine == "file":
        url, init_args = resolve_db_url(disk / "wh.duckdb"), ""
    else:
        url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'cat.sqlite'}")
        init_args = f"--data-path {shlex.quote(str(disk / 'files'))}"
    wh = f"{shlex.quote(sys.executable)} -m warehouse.cli --db {shlex.quote(url)}"
    d, stage = shlex.quote(str(disk)), shlex.quote(str(tmp_path / "stage"))
    script = f"""set -e
mount -t tmpfs -o size={TMPFS_KB[engine]}k tmpfs {d}
{wh} {init_args} init >/dev/null
set +e
{wh} ingest -q {shlex.quote(str(root))}
echo "exit=$?"
set -e
mkdir {stage} && cp -a {d}/. {stage}/ && umount {d} && cp -a {stage}/. {d}/
"""
    done = run_script(script)
    assert "exit=" in done.stdout, done.stderr
    return url, int(done.stdout.rsplit("exit=", 1)[1].split()[0]), done.stderr


@pytest.mark.parametrize("engine", ["file", "ducklake"])
def test_ingest_stops_at_the_first_full_disk_error_and_keeps_what_landed(engine, small_sample_root, tmp_path):
    require_mounts()
    url, code, stderr = ingest_on_a_full_disk(engine, tmp_path, small_sample_root)
    lines = stderr.strip().splitlines()
    assert code == 1, stderr
    assert len(lines) == 1 and lines[0].startswith("Error: the ingest stopped at "), stderr
    assert str(small_sample_root) in lines[0] and "no space left on the device for " in lines[0]
    assert str(tmp_path / "disk") in lines[0] and "MB free" in lines[0] and "Free space there" in lines[0]

    stopped = counts(url)
    assert stopped["sources"] > 0  # the files committed before the disk filled stay
    assert stopped["ingest_errors"] == 0  # no file was rejected for the disk's sake
    if engine == "ducklake":  # the stopped commit's Parquet goes with cleanup
        assert cli(url, "cleanup", "--older-than", "0").exit_code == 0

    again = cli(url, "ingest", "-q", str(small_sample_root))
    assert again.exit_code in (0, 3), again.output
    reference = resolve_db_url(tmp_path / "reference.duckdb")
    assert cli(reference, "init").exit_code == 0
    assert cli(reference, "ingest", "-q", str(small_sample_root)).exit_code in (0, 3)
    assert counts(url) == counts(reference)
    if engine == "ducklake":
        assert cli(url, "cleanup", "--older-than", "0", "--dry-run").output.startswith("Would delete 0 orphaned")


def test_a_full_ducklake_catalog_disk_is_one_line_not_a_lost_race(tmp_path):
    """SQLite's 'database or disk is full' fails DuckLake's COMMIT as a lost race would:
    retrying it for 120 s and calling it other writers' doing would be wrong."""
    from tests.mounts import one_error_line, run_mounted, tmpfs, warehouse

    require_mounts()
    disk = tmp_path / "disk"
    disk.mkdir()
    done = run_mounted(tmpfs(disk, 256), warehouse(
        "--db", f"ducklake:sqlite:{disk / 'cat.sqlite'}", "--data-path", str(tmp_path / "files"), "init"))
    line = one_error_line(done)
    assert "the DuckLake catalog's disk is full" in line and "Free space" in line
