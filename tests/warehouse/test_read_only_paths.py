"""A warehouse, a DuckLake catalog, its data path or an export on a read-only file system:
one `Error:` line naming the path and the option that moves it, and nothing half-made.

The read-only folder is a read-only bind mount in a private mount namespace (tests/mounts.py):
root, which these tests run as, writes through chmod."""
from __future__ import annotations

from tests.mounts import one_error_line, read_only, require_mounts, run_mounted, tmpfs, warehouse


def test_file_warehouse_in_a_read_only_folder(tmp_path):
    require_mounts()
    ro = tmp_path / "ro"
    ro.mkdir()
    line = one_error_line(run_mounted(read_only(ro), warehouse("--db", str(ro / "wh.duckdb"), "init")))
    assert f"cannot create the warehouse at {ro / 'wh.duckdb'}: read-only file system" in line
    assert "--db PATH" in line
    assert not list(ro.iterdir())


def test_existing_file_warehouse_on_a_read_only_disk_still_reads(db_url, tmp_path):
    require_mounts()
    folder = tmp_path  # db_url's file lives here
    path = db_url.removeprefix("duckdb:///")
    line = one_error_line(run_mounted(read_only(folder), warehouse("--db", path, "init")))
    assert f"cannot open the warehouse for writing at {path}: read-only file system" in line
    done = run_mounted(read_only(folder), warehouse("--db", path, "sql", "SELECT count(*) AS n FROM arms"))
    assert done.returncode == 0, done.stderr


def test_ducklake_catalog_in_a_read_only_folder(tmp_path):
    require_mounts()
    ro = tmp_path / "ro"
    ro.mkdir()
    line = one_error_line(run_mounted(read_only(ro), warehouse(
        "--db", f"ducklake:sqlite:{ro / 'cat.sqlite'}", "init")))
    assert f"cannot create the DuckLake catalog in {ro}: read-only file system" in line
    assert "--db ducklake:sqlite:PATH" in line
    assert not list(ro.iterdir())


def test_ducklake_data_path_in_a_read_only_folder(tmp_path):
    require_mounts()
    ro = tmp_path / "ro"
    ro.mkdir()
    catalog = tmp_path / "cat.sqlite"
    line = one_error_line(run_mounted(read_only(ro), warehouse(
        "--db", f"ducklake:sqlite:{catalog}", "--data-path", str(ro / "files"), "init")))
    assert f"cannot write the DuckLake data files in {ro / 'files'}/: read-only file system" in line
    assert "--data-path DIR" in line
    assert not catalog.exists()  # no catalog left behind without its data path


def test_export_into_a_read_only_folder(db_url, tmp_path):
    require_mounts()
    ro = tmp_path / "ro"
    ro.mkdir()
    for out in (ro, ro / "new"):
        line = one_error_line(run_mounted(read_only(ro), warehouse(
            "--db", db_url, "export", str(out))))
        assert f"cannot write the export into {out}: read-only file system" in line
    assert not list(ro.iterdir())


def test_export_onto_a_full_disk_says_it_is_incomplete(db_url, tmp_path):
    require_mounts()
    disk = tmp_path / "disk"
    disk.mkdir()
    line = one_error_line(run_mounted(tmpfs(disk, 48), warehouse("--db", db_url, "export", str(disk))))
    assert f"at {disk}/" in line and "no space left on the device" in line and "MB free" in line
    assert f"The export in {disk} is incomplete: run it again with --overwrite." in line
