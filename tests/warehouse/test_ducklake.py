"""DuckLake as the warehouse's engine: URLs, one schema, the same views, retried commits, migrate-to.

The warehouse under test is a `ducklake:sqlite:` catalog in tmp_path (PostgreSQL runs in CI's
stage, tests/warehouse/test_concurrency.py). Where DuckLake differs from the file (no keys,
no indexes) the difference is asserted here, as docs/ducklake.md describes it.
"""
from __future__ import annotations


import pytest
from click.testing import CliRunner

from warehouse.cli import main
from warehouse.config import parse_ducklake, resolve_db_url
from warehouse.errors import TerminalError




@pytest.fixture(scope="module")
def file_and_lake(tmp_path_factory, small_sample_root):
    """The small root ingested into a file, and that file copied into DuckLake by migrate-to."""
    tmp = tmp_path_factory.mktemp("engines")
    file_url = resolve_db_url(tmp / "wh.duckdb")
    lake_url = resolve_db_url(f"ducklake:sqlite:{tmp / 'catalog.sqlite'}", tmp / "files")
    runner = CliRunner()
    for args in (["--db", file_url, "init"], ["--db", file_url, "ingest", str(small_sample_root)]):
        result = runner.invoke(main, args)
        assert result.exit_code in (0, 2), result.output  # 2: the sample's deliberate bad lines
    result = runner.invoke(main, ["--db", file_url, "migrate-to", lake_url])
    assert result.exit_code == 0, result.output
    return file_url, lake_url, result.output


def test_ducklake_urls_resolve_to_absolute_catalogs_and_data_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = resolve_db_url("ducklake:sqlite:cat.sqlite", "files")
    target = parse_ducklake(url)
    assert (target.catalog, target.location) == ("sqlite", str(tmp_path / "cat.sqlite"))
    assert target.data_path == str(tmp_path / "files") + "/"
    monkeypatch.setenv("ROLLOUT_WAREHOUSE_DATA_PATH", "s3://bucket/wh/")
    pg = parse_ducklake(resolve_db_url("ducklake:postgres:dbname=wh host=/tmp"))
    assert (pg.catalog, pg.location, pg.data_path) == ("postgres", "dbname=wh host=/tmp", "s3://bucket/wh/")
    assert resolve_db_url("wh.duckdb") == f"duckdb:///{tmp_path / 'wh.duckdb'}"  # the file: unchanged
    with pytest.raises(TerminalError, match="ducklake:sqlite:PATH"):
        parse_ducklake("ducklake:mysql:x")


def test_reading_a_catalog_that_does_not_exist_names_the_fix(tmp_path):
    result = CliRunner().invoke(main, ["--db", f"ducklake:sqlite:{tmp_path / 'none.sqlite'}", "tables"])
    assert result.exit_code == 1
    assert "Error: no warehouse at" in result.output and "init" in result.output
    assert not (tmp_path / "none.sqlite").exists()


def test_after_attaching_the_lake_an_extension_with_a_bad_signature_is_refused(file_and_lake, tmp_path):
    """The package's own extension files load without DuckDB's signature check (it hashes the
    whole file on every LOAD), and the check is back on before anything else runs, on both
    ways into a lake: a tampered copy of an extension is refused for its signature."""
    import shutil

    from warehouse.db import engine, extension_file, lake_connection

    tampered = tmp_path / "tampered.duckdb_extension"
    shutil.copyfile(extension_file("ducklake"), tampered)
    with open(tampered, "r+b") as f:
        f.seek(tampered.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    _, lake_url, _ = file_and_lake
    con = lake_connection(lake_url, read_only=True)
    eng = engine(lake_url, read_only=True)
    try:
        raw = eng.raw_connection()
        for each in (con, raw.driver_connection):
            assert each.execute("SELECT current_setting('allow_unsigned_extensions')").fetchone()[0] is False
            with pytest.raises(Exception, match="signature is either missing or invalid"):
                each.execute(f"LOAD '{tampered}'")
        raw.close()
    finally:
        con.close()
        eng.dispose()


def test_one_schema_but_no_keys_or_indexes_on_ducklake(file_and_lake):
    from warehouse.db import connect

    file_url, lake_url, _ = file_and_lake

    def shape(url):
        with connect(url, read_only=True) as con:
            cols = con.execute("SELECT table_name, column_name, data_type, is_nullable FROM duckdb_columns() "
                               "WHERE database_name = current_database() ORDER BY ALL").fetchall()
            keys = con.execute("SELECT count(*) FROM duckdb_constraints() WHERE database_name = current_database() "
                               "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')").fetchone()[0]
            indexes = con.execute("SELECT count(*) FROM duckdb_indexes() "
                                  "WHERE database_name = current_database()").fetchone()[0]
        return cols, keys, indexes

    file_cols, file_keys, file_indexes = shape(file_url)
    lake_cols, lake_keys, lake_indexes = shape(lake_url)
    assert lake_cols == file_cols  # every table, column, type and NOT NULL the same
    assert file_keys > 0 and file_indexes > 0
    assert lake_keys == 0 and lake_indexes == 0


def _tables_without_stats(con) -> list[str]:
    from warehouse.db import LAKE_ALIAS

    meta = f"__ducklake_metadata_{LAKE_ALIAS}"
    return [t for (t,) in con.execute(
        f"SELECT t.table_name FROM {meta}.ducklake_table AS t LEFT JOIN {meta}.ducklake_table_stats AS s "
        "USING (table_id) WHERE t.end_snapshot IS NULL AND s.table_id IS NULL ORDER BY 1").fetchall()]


def _counts(con) -> dict[str, int]:
    tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() "
                                        "WHERE database_name = current_database()").fetchall()]
    return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}


def test_init_leaves_no_lake_table_without_statistics_and_no_row_behind(file_and_lake, tmp_path):
    """DuckLake plans a query over a table that never held a row by asking the catalog for
    every column it reads, each time (warehouse.migrate.prime_lake_stats): after init every
    table has statistics and the empty ones are still empty; an upgrade of a lake holding rows
    leaves every count as it was."""
    from warehouse.db import connect
    from warehouse.migrate import init_db, upgrade
    from warehouse.schema import TABLE_NAMES

    url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'new.sqlite'}", tmp_path / "files")
    init_db(url)
    with connect(url, read_only=True) as con:
        assert _tables_without_stats(con) == []
        counts = _counts(con)
    assert set(TABLE_NAMES) <= set(counts)
    assert {t for t, n in counts.items() if n} == {"alembic_version", "arms", "questions"}

    _, lake_url, _ = file_and_lake
    with connect(lake_url, read_only=True) as con:
        before = _counts(con)
    upgrade(lake_url)
    with connect(lake_url, read_only=True) as con:
        assert _counts(con) == before and before["nodes"] > 0
        assert _tables_without_stats(con) == []


def test_every_view_reads_the_same_on_ducklake_as_on_the_file(file_and_lake):
    from warehouse.migrate import view_files
    from warehouse.query import run_query

    file_url, lake_url, _ = file_and_lake
    for name, _ in view_files():
        on_file = run_query(file_url, f'SELECT * FROM "{name}" ORDER BY ALL')
        on_lake = run_query(lake_url, f'SELECT * FROM "{name}" ORDER BY ALL')
        assert on_lake.columns == on_file.columns and on_lake.rows == on_file.rows, name
    assert run_query(lake_url, "SELECT count(*) FROM nodes").rows[0][0] > 0


def test_a_token_search_on_ducklake_finds_what_it_finds_on_the_file(file_and_lake):
    """On DuckLake the search narrows by nodes, not row ids: the same rows and nodes as the file's."""
    from warehouse.query import run_query
    from warehouse.tokens import search_token, search_token_nodes

    file_url, lake_url, _ = file_and_lake
    ids = [t for (t,) in run_query(file_url, 'SELECT "token_id" FROM "node_tokens" GROUP BY 1 '
                                             'ORDER BY count(*) DESC, 1 LIMIT 3').rows]
    assert ids
    for token_id in ids + [10**9]:
        on_file = search_token(file_url, token_id)
        assert search_token(lake_url, token_id).rows == on_file.rows
        assert search_token_nodes(lake_url, token_id).rows == search_token_nodes(file_url, token_id).rows
    assert search_token(file_url, ids[0]).rows


def test_an_ingest_into_ducklake_leaves_its_token_index_one_write_without_its_batches_files(tmp_path, monkeypatch):
    """Each batch commits a write of the index; the ingest then merges them into
    one, in several passes (a file each, of its token id range), and the batches' files leave the table (a file whose rows are all
    deleted is dropped): a lookup reads one file per ingest, whatever the batches. The nodes
    found are the file's, and a second ingest's merge leaves the first one's write as it was."""
    import shutil

    from ingest.pipeline import ingest_roots
    from ingest.sample import write_sample_root
    from warehouse import tokens
    from warehouse.db import connect
    from warehouse.migrate import init_db

    monkeypatch.setattr(tokens, "ENTRIES_PER_MERGE", 3000)
    root = write_sample_root(tmp_path / "root", payload_tokens=(20, 60))
    runs = sorted(p for p in root.iterdir() if p.is_dir())
    first = tmp_path / "first"
    first.mkdir()
    shutil.move(str(runs[0]), first / runs[0].name)
    lake_url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'catalog.sqlite'}", tmp_path / "files")
    file_url = resolve_db_url(tmp_path / "wh.duckdb")
    for url in (lake_url, file_url):
        init_db(url)
        for part in (first, root):
            report = ingest_roots(url, [str(part)], batch_bytes=600_000)  # a write per batch of ~0.6 MB
            assert report.files_failed == 0 and report.files_loaded > 1
            assert not [w for w in report.warnings if "token index" in w]
            if url == lake_url and part == first:
                with connect(url, read_only=True) as con:
                    before = con.execute('SELECT * FROM "node_token_index" ORDER BY ALL').fetchall()
    with connect(lake_url, read_only=True) as con:
        assert con.execute('SELECT count(DISTINCT "write_id") FROM "node_token_index_writes"').fetchone()[0] == 2
        files = con.execute("SELECT data_file, delete_file FROM ducklake_list_files('wh', 'node_token_index')").fetchall()
        assert files and not [f for f in files if f[1] is not None]  # the batches' files dropped whole
        in_files = con.execute("SELECT sum(num_rows) FROM parquet_file_metadata(?)", [[f for f, _ in files]]).fetchone()[0]
        assert in_files == con.execute('SELECT count(*) FROM "node_token_index"').fetchone()[0]
        kept = con.execute('SELECT min("write_id") FROM "node_token_index_writes"').fetchone()[0]
        assert con.execute('SELECT * FROM "node_token_index" WHERE "write_id" = ? ORDER BY ALL', [kept]).fetchall() == before
        held = [t for (t,) in con.execute('SELECT DISTINCT "token_id" FROM "node_token_index" ORDER BY 1').fetchall()]
    assert len(held) > 10
    for token_id in held[::max(1, len(held) // 10)]:
        assert tokens.search_token_nodes(lake_url, token_id).rows == tokens.search_token_nodes(file_url, token_id).rows


def test_a_lake_writes_its_parquet_in_zstd(file_and_lake):
    """`warehouse init` sets the lake's parquet_compression (warehouse.migrate.LAKE_OPTIONS) in
    its catalog, so every writer's files, the copy migrate-to made included, are zstd."""
    from warehouse.db import connect
    from warehouse.migrate import LAKE_OPTIONS

    _, lake_url, _ = file_and_lake
    assert LAKE_OPTIONS["parquet_compression"] == "zstd"
    with connect(lake_url, read_only=True) as con:
        assert con.execute("SELECT value FROM wh.options() WHERE option_name = 'parquet_compression'").fetchone() == ("zstd",)
        files = [f for (f,) in con.execute("SELECT data_file FROM ducklake_list_files('wh', 'node_payloads')").fetchall()]
        assert files
        codecs = {c for (c,) in con.execute("SELECT DISTINCT compression FROM parquet_metadata(?)", [files]).fetchall()}
    assert codecs == {"ZSTD"}


def test_a_lake_writes_its_token_index_in_row_groups_of_2048_rows(tmp_path):
    """`warehouse init` sets node_token_index's parquet_row_group_size (LAKE_TABLE_OPTIONS), so
    an index write is row groups of at most 2,048 rows that a lookup's token id range picks
    from (and node_payloads' row groups, of 256); another table keeps DuckDB's row groups."""
    from warehouse.db import ROW_GROUP_SIZE, connect
    from warehouse.migrate import LAKE_TABLE_OPTIONS, init_db

    assert LAKE_TABLE_OPTIONS["node_token_index"]["parquet_row_group_size"] == ROW_GROUP_SIZE
    url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'catalog.sqlite'}", tmp_path / "files")
    init_db(url)
    with connect(url) as con:
        assert con.execute("SELECT value, scope, scope_entry FROM wh.options() WHERE option_name = "
                           "'parquet_row_group_size' ORDER BY scope_entry").fetchall() == [
            ("256", "TABLE", "main.node_payloads"), ("2048", "TABLE", "main.node_token_index")]
        con.execute('INSERT INTO "node_token_index" SELECT range, 1, [range % 7], [1] FROM range(10000)')
        con.execute('INSERT INTO "node_token_index_writes" SELECT 1, range FROM range(10000)')
        groups = {}
        for table in ("node_token_index", "node_token_index_writes"):
            files = [f for (f,) in con.execute(f"SELECT data_file FROM ducklake_list_files('wh', '{table}')").fetchall()]
            groups[table] = con.execute("SELECT DISTINCT row_group_id, row_group_num_rows FROM parquet_metadata(?) "
                                        "ORDER BY 1", [files]).fetchall()
    assert [n for _, n in groups["node_token_index"]] == [2048] * 4 + [10000 - 4 * 2048]
    assert groups["node_token_index_writes"] == [(0, 10000)]


def test_migrate_to_reports_every_table_and_copies_back(file_and_lake, tmp_path):
    from warehouse.query import list_tables

    file_url, lake_url, output = file_and_lake
    assert "every row count matches" in output and "node_payloads" in output
    back = resolve_db_url(tmp_path / "back.duckdb")
    result = CliRunner().invoke(main, ["--db", lake_url, "migrate-to", str(tmp_path / "back.duckdb")])
    assert result.exit_code == 0, result.output
    assert list_tables(back).rows == list_tables(file_url).rows
    again = CliRunner().invoke(main, ["--db", lake_url, "migrate-to", str(tmp_path / "back.duckdb")])
    assert again.exit_code == 1 and "already holds data" in again.output


def test_ingest_straight_into_ducklake_gives_the_files_rows_with_one_id_per_source(file_and_lake, small_sample_root,
                                                                                   tmp_path):
    """A batch's node files land in one transaction with their sources rows inserted together,
    so each new file must get its own id there too (max() + 1 alone gave them all the same)."""
    from warehouse.query import run_query

    file_url, _, _ = file_and_lake
    lake_url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'direct.sqlite'}", tmp_path / "files")
    runner = CliRunner()
    assert runner.invoke(main, ["--db", lake_url, "init"]).exit_code == 0
    for _ in range(2):  # the second run finds every file unchanged
        result = runner.invoke(main, ["--db", lake_url, "ingest", str(small_sample_root)])
        assert result.exit_code in (0, 2), result.output
    ids = "SELECT count(*), count(DISTINCT source_id), count(DISTINCT path) FROM sources"
    total, distinct_ids, distinct_paths = run_query(lake_url, ids).rows[0]
    assert total == distinct_ids == distinct_paths == run_query(file_url, ids).rows[0][0]
    per_run = "SELECT run_id, count(*) FROM nodes GROUP BY ALL ORDER BY ALL"
    assert run_query(lake_url, per_run).rows == run_query(file_url, per_run).rows


def test_the_gate_and_metrics_run_on_ducklake(file_and_lake):
    _, lake_url, _ = file_and_lake
    for args in (["check"], ["metrics", "--format", "csv"]):
        result = CliRunner().invoke(main, ["--db", lake_url, *args])
        assert result.exit_code == 0, result.output


def test_a_commit_that_loses_the_race_is_redone_on_the_new_snapshot(tmp_path):
    """Two writers take max(source_id) + 1 in their snapshots; the one whose commit loses is
    redone from the start, so the ids stay unique (DuckLake's own retry would commit both)."""
    from ingest.sources import lookup_source_id, open_source
    from warehouse.db import connect, transaction
    from warehouse.migrate import init_db

    url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'catalog.sqlite'}")
    init_db(url)
    attempts = []
    with connect(url) as a, connect(url) as b:
        def work():
            attempts.append(lookup_source_id(a, "train://a")[0])
            open_source(a, source_id=attempts[-1], existed=False, path="train://a", kind="train_round")
            if len(attempts) == 1:  # meanwhile another process lands its own source
                def other():
                    sid, _ = lookup_source_id(b, "train://b")
                    open_source(b, source_id=sid, existed=False, path="train://b", kind="train_round")
                transaction(b, other)

        transaction(a, work)
        rows = a.execute("SELECT path, source_id FROM sources ORDER BY path").fetchall()
    assert attempts == [1, 2]
    assert rows == [("train://a", 2), ("train://b", 1)]


def test_the_metric_views_read_nodes_on_ducklake_as_on_the_file(file_and_lake):
    """The plans of the views the run page reads have the file's reads of nodes on DuckLake too,
    where a view keeps its text as written and each read costs its catalog queries
    (tests/sql/test_view_scans.py)."""
    from tests.sql.test_view_scans import NODE_READS, node_reads
    from warehouse.db import connect

    _, lake_url, _ = file_and_lake
    with connect(lake_url, read_only=True) as con:
        run_id = con.execute('SELECT min("run_id") FROM "nodes"').fetchone()[0]
        assert {view: node_reads(con, view, run_id) for view in NODE_READS} == NODE_READS


def test_tables_counts_on_ducklake_equal_count_star_after_a_source_is_reloaded(small_sample_root, tmp_path):
    """`warehouse tables` counts node_tokens from nodes' stored lengths on DuckLake (no payload
    is read) and tables through their Parquet footers and delete files: after a node file is
    reloaded (its rows deleted and written again, fewer of them), every count is still exact."""
    import shutil

    from warehouse.db import connect
    from warehouse.query import COUNTED_FROM_TABLES, LAKE_VIEWS_NOT_COUNTED, list_tables, run_query

    root = tmp_path / "root"
    shutil.copytree(small_sample_root, root)
    lake_url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'lake.sqlite'}", tmp_path / "files")
    runner = CliRunner()
    assert runner.invoke(main, ["--db", lake_url, "init"]).exit_code == 0
    assert runner.invoke(main, ["--db", lake_url, "ingest", str(root)]).exit_code in (0, 2)
    tokens = 'SELECT (SELECT count(*) FROM "nodes"), (SELECT count(*) FROM "node_tokens")'
    nodes_before, tokens_before = run_query(lake_url, tokens).rows[0]
    node_file = max(root.rglob("*__[0-9]*.jsonl"), key=lambda p: p.stat().st_size)
    lines = node_file.read_bytes().splitlines(keepends=True)
    node_file.write_bytes(b"".join(lines[: len(lines) // 2]))  # the file changed: reloaded, half its nodes
    assert runner.invoke(main, ["--db", lake_url, "ingest", str(root)]).exit_code in (0, 2)

    listed = list_tables(lake_url).rows
    assert {kind for _, kind, _, _ in listed} == {"table", "view"}
    with connect(lake_url, read_only=True) as con:
        for name, kind, n, grain in listed:
            if kind == "table" or name in COUNTED_FROM_TABLES:  # counted from the tables under them
                assert n == con.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0], name
            else:  # the other views are listed with their grain, not counted (each plan costs seconds)
                assert n is None and grain.startswith("one row per"), (name, n, grain)
    after = {name: n for name, _, n, _ in listed}
    assert 0 < after["nodes"] < nodes_before and 0 < after["node_tokens"] < tokens_before
    output = runner.invoke(main, ["--db", lake_url, "tables"]).output
    assert output.rstrip().endswith(LAKE_VIEWS_NOT_COUNTED)
    assert "one row per" in next(line for line in output.splitlines() if line.startswith("round_times "))
    assert after["run_metrics"] == 3  # a metric view counted as its keys, on DuckLake too


def test_tables_lists_on_ducklake_what_information_schema_lists(tmp_path):
    """On DuckLake `warehouse tables` names the tables from DuckLake's own table list (not
    information_schema, which loads every table's statistics first): the same names, kinds and
    order; a table in another schema is not listed, as information_schema's main is all it lists."""
    from warehouse.db import connect
    from warehouse.migrate import init_db
    from warehouse.query import LISTING, list_tables

    url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'lake.sqlite'}", tmp_path / "files")
    init_db(url)

    def listed() -> list[tuple[str, str]]:
        return [(name, kind) for name, kind, _, _ in list_tables(url).rows]

    def expected() -> list[tuple[str, str]]:
        with connect(url, read_only=True) as con:
            return [(name, "view" if kind == "VIEW" else "table") for name, kind in con.execute(LISTING).fetchall()]

    assert listed() == expected()
    assert {"nodes", "runs", "alembic_version"} <= {n for n, k in listed() if k == "table"}
    assert {"run_metrics", "node_tokens"} <= {n for n, k in listed() if k == "view"}
    with connect(url) as con:
        con.execute("CREATE TABLE zz_added (x INTEGER)")  # last by name: the order is checked too
        con.execute("CREATE SCHEMA side")
        con.execute("CREATE TABLE side.aa_elsewhere (x INTEGER)")
    assert listed() == expected()
    assert ("zz_added", "table") in listed() and "aa_elsewhere" not in {n for n, _ in listed()}
