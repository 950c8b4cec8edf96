"""A token id across all runs, found through node_token_index: the same rows as filtering
node_tokens (which unrolls every array), the index kept by every writer of payloads (ingest,
a changed source's reload, a restore) and built by migration 0008 for payloads held before."""
from __future__ import annotations

import json
import shutil
from collections import Counter

import duckdb
import pytest
from click.testing import CliRunner

from ingest.pipeline import ingest_roots
from ingest.sample import write_sample_root
from warehouse.cli import main
from warehouse.db import connect
from warehouse import migrate
from warehouse.migrate import init_db, upgrade
from warehouse import tokens
from warehouse.tokens import search_token, search_token_nodes

VIEW = ('SELECT * FROM "node_tokens" WHERE "token_id" = ? AND (? IS NULL OR "run_id" = ?) '
        'ORDER BY "run_id", "round", "task", "node_id", "source_id", "line_no", "position"')
#: (token id, source_id, line_no) of every response token id a payload holds, once each
DERIVED = ('SELECT DISTINCT "token_id", "source_id", "line_no" FROM (SELECT "source_id", "line_no", '
           'unnest("response_token_ids") AS "token_id" FROM "node_payloads") WHERE "token_id" IS NOT NULL')
#: the same, as the index holds them: the entries of each source in the write that holds it now
HELD = ('SELECT "token_id", "source_id", "line_no" FROM (SELECT "token_id", "write_id", '
        'unnest("source_ids") AS "source_id", unnest("line_nos") AS "line_no" FROM "node_token_index") '
        'JOIN "node_token_index_writes" USING ("write_id", "source_id")')


def _train(root) -> None:
    """A trainer's record on the first node file's nodes, so the trainer's columns are searched too."""
    path = sorted(root.rglob("*.jsonl"))[0]
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for rec in records:
        n = len(rec.get("response_token_ids") or [])
        rec.update(trainer_logprobs=[-0.25] * n, ref_logprobs=[-0.5] * n, ratios=[1.0] * n, train_step=1,
                   advantage=0.5)
    path.write_text("".join(json.dumps(rec) + "\n" for rec in records))


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tokens")
    root = write_sample_root(tmp / "root", payload_tokens=(20, 60))
    _train(root)
    url = f"duckdb:///{tmp / 'wh.duckdb'}"
    init_db(url)
    report = ingest_roots(url, [str(root)])
    assert report.files_failed == 0 and report.rows > 100
    return url, root


def _view(url: str, token_id: int, run_id: str | None = None) -> list[tuple]:
    with connect(url, read_only=True) as con:
        return con.execute(VIEW, [token_id, run_id, run_id]).fetchall()


def _index_equals_its_payloads(url: str) -> None:
    """The index's live entries are the payloads' token ids, once each; rows of at most
    NODES_PER_ROW nodes, sorted; each source in one write; and no row of a write without sources."""
    with connect(url, read_only=True) as con:
        held = Counter(con.execute(HELD).fetchall())
        derived = Counter(con.execute(DERIVED).fetchall())
        assert con.execute('SELECT max(len("source_ids")) FROM "node_token_index"').fetchone()[0] <= tokens.NODES_PER_ROW
        assert con.execute('SELECT count(*) FROM "node_token_index" WHERE len("source_ids") <> len("line_nos") '
                           'OR list_zip("source_ids", "line_nos") <> list_sort(list_zip("source_ids", "line_nos"))'
                           ).fetchone()[0] == 0
        assert con.execute('SELECT count(*) - count(DISTINCT "source_id") FROM "node_token_index_writes"'
                           ).fetchone()[0] == 0
        assert con.execute('SELECT count(*) FROM "node_token_index" WHERE "write_id" NOT IN '
                           '(SELECT "write_id" FROM "node_token_index_writes")').fetchone()[0] == 0
    assert held and held == derived


def _token_ids(url: str) -> list[tuple[int, int]]:
    """(token id, nodes holding it): held by the most nodes, by a middling number, by one; and
    one held by none."""
    with connect(url, read_only=True) as con:
        counts = con.execute(f'SELECT "token_id", count(*) AS n FROM ({HELD}) GROUP BY 1 ORDER BY n DESC, 1'
                             ).fetchall()
    assert counts[0][1] > 5 and counts[-1][1] == 1
    return [counts[0], counts[len(counts) // 2], counts[-1], (max(t for t, _ in counts) + 1, 0)]


@pytest.mark.parametrize("rows_per_group", [16, 64, tokens.ROWS_PER_GROUP])  # several row groups, as shipped
def test_a_token_search_finds_the_rows_node_tokens_holds_for_it(warehouse, monkeypatch, rows_per_group):
    """For an id held by the most nodes, a middling number, one and none, over every run and
    one run: the view's rows, read a statement per payload row group holding the id, each
    statement within one row group's row ids (so its memory is one row group's arrays), and
    progress told after each."""
    monkeypatch.setattr(tokens, "ROWS_PER_GROUP", rows_per_group)
    statements = []
    narrowed = tokens.narrowed_view
    monkeypatch.setattr(tokens, "narrowed_view", lambda keys, row_ids=None: statements.append(row_ids)
                        or narrowed(keys, row_ids))
    url, _ = warehouse
    _index_equals_its_payloads(url)
    with connect(url, read_only=True) as con:
        trained = con.execute('SELECT count(*) FROM "node_tokens" WHERE "trainer_logprob" IS NOT NULL').fetchone()[0]
        payloads = con.execute('SELECT count(*) FROM "node_payloads"').fetchone()[0]
    assert trained > 0
    for token_id, nodes in _token_ids(url):
        told = []
        rows = search_token(url, token_id, progress=lambda done, total: told.append((done, total))).rows
        assert rows == _view(url, token_id) and len(rows) >= nodes, token_id
        assert told == [(i, len(told)) for i in range(1, len(told) + 1)] and bool(told) == bool(rows)
        if rows:  # one run's
            run_id = rows[-1][0]
            assert search_token(url, token_id, run_id).rows == _view(url, token_id, run_id) != []
    assert len({r[0] for r in search_token(url, _token_ids(url)[0][0]).rows}) > 1  # across runs
    assert search_token(url, _token_ids(url)[-1][0]).rows == []
    assert statements and all(last - first + 1 == rows_per_group for first, last in statements)
    if rows_per_group == 16:  # the most held id spans several row groups, a statement each
        statements.clear()
        search_token(url, _token_ids(url)[0][0])
        assert 1 < len(statements) == len(set(statements)) <= -(-payloads // 16)


def test_the_nodes_holding_a_token_are_the_nodes_of_its_rows(warehouse, monkeypatch):
    """search_token_nodes (the index and nodes alone) names exactly the nodes node_tokens has
    the id in, once each, in the same order, for every run and for one run; and reads no
    token array (node_payloads is out of its reach)."""
    url, _ = warehouse
    for token_id, _nodes in _token_ids(url):
        view = _view(url, token_id)
        nodes = search_token_nodes(url, token_id)
        assert nodes.columns[:6] == ["run_id", "round", "task", "node_id", "source_id", "line_no"]
        assert [r[:6] for r in nodes.rows] == list(dict.fromkeys(r[:6] for r in view)), token_id
        if view:
            run_id = view[-1][0]
            assert [r[:6] for r in search_token_nodes(url, token_id, run_id).rows] == \
                list(dict.fromkeys(r[:6] for r in _view(url, token_id, run_id)))
    assert "node_payloads" not in tokens.NODES_HOLDING and "node_tokens" not in tokens.NODES_HOLDING
    token_id = _token_ids(url)[0][0]
    result = CliRunner().invoke(main, ["--db", url.removeprefix("duckdb:///"), "token", str(token_id), "--nodes",
                                       "--format", "json"])
    assert result.exit_code == 0, result.output
    assert [tuple(r.values())[:6] for r in json.loads(result.output)] == \
        [r[:6] for r in search_token_nodes(url, token_id).rows]


def test_a_changed_source_leaves_no_index_rows_of_its_old_payloads(warehouse, tmp_path):
    url, root = warehouse
    url2 = f"duckdb:///{shutil.copy(url.removeprefix('duckdb:///'), tmp_path / 'wh.duckdb')}"
    path = sorted(root.rglob("*.jsonl"))[1]
    original = path.read_text()
    try:
        records = [json.loads(line) for line in original.splitlines()]
        for rec in records:
            rec["response_token_ids"] = [999_999] * 3
            rec["response_logprobs"] = [-1.0] * 3
        path.write_text("".join(json.dumps(rec) + "\n" for rec in records))
        ingest_roots(url2, [str(root)])
    finally:
        path.write_text(original)
    _index_equals_its_payloads(url2)
    assert len(search_token(url2, 999_999).rows) == 3 * len(records) == len(_view(url2, 999_999))


@pytest.mark.parametrize("per_write, per_merge", [(tokens.NODES_PER_REBUILT_WRITE, tokens.ENTRIES_PER_MERGE),
                                                  (7, 500)])  # many writes, merged in many passes
def test_a_restored_export_searches_the_same(warehouse, tmp_path, monkeypatch, per_write, per_merge):
    """A restore builds the index again, NODES_PER_REBUILT_WRITE payloads at a time, merged
    into one write."""
    monkeypatch.setattr(tokens, "NODES_PER_REBUILT_WRITE", per_write)
    monkeypatch.setattr(tokens, "ENTRIES_PER_MERGE", per_merge)
    url, _ = warehouse
    runner = CliRunner()
    db = url.removeprefix("duckdb:///")
    assert runner.invoke(main, ["--db", db, "export", str(tmp_path / "lake")]).exit_code == 0
    fresh = f"duckdb:///{tmp_path / 'fresh.duckdb'}"
    init_db(fresh)
    result = runner.invoke(main, ["--db", fresh.removeprefix("duckdb:///"), "ingest", str(tmp_path / "lake")])
    assert result.exit_code == 0, result.output
    _index_equals_its_payloads(fresh)
    with connect(fresh, read_only=True) as con:
        assert con.execute('SELECT count(DISTINCT "write_id") FROM "node_token_index_writes"').fetchone()[0] == 1
    token_id = _token_ids(url)[0][0]
    assert search_token(fresh, token_id).rows == search_token(url, token_id).rows != []


def test_the_cli_prints_the_rows_of_one_run(warehouse):
    url, _ = warehouse
    token_id = _token_ids(url)[0][0]
    run_id = search_token(url, token_id).rows[0][0]
    result = CliRunner().invoke(main, ["--db", url.removeprefix("duckdb:///"), "token", str(token_id),
                                       "--run", run_id, "--format", "json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert printed and {row["run_id"] for row in printed} == {run_id}
    assert len(printed) == len(_view(url, token_id, run_id))


def test_migration_0008_indexes_the_payloads_already_held(tmp_path):
    path = tmp_path / "old.duckdb"
    url = f"duckdb:///{path}"
    upgrade(url, "0007")
    old = duckdb.connect(str(path))  # as a writer before 0008 wrote it: payloads, no index
    try:
        old.execute("INSERT INTO node_payloads (source_id, line_no, response_token_ids) VALUES "
                    "(1, 1, [5, 3, 5, NULL]), (1, 2, [3]), (2, 1, []), (2, 2, NULL), (3, 1, [7, 7, 7])")
    finally:
        old.close()
    assert upgrade(url, "0008") == "0008"
    with connect(url, read_only=True) as con:
        assert con.execute('SELECT * FROM "node_token_index"').fetchall() == [
            (3, 1, 1), (3, 1, 2), (5, 1, 1), (7, 3, 1)]


def _migration_0010():
    import importlib.util
    from pathlib import Path

    import migrations

    path = Path(migrations.__file__).parent / "versions" / "0010_token_index_by_write.py"
    spec = importlib.util.spec_from_file_location("migration_0010", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_migration_0010_passes_cover_the_token_ids_in_ranges():
    ranges = _migration_0010()._ranges
    assert ranges(None, None, 0) == []
    assert ranges(5, 5, 3) == [(5, 5)]
    assert ranges(0, 150_999, 10_000_000) == [(0, 50_333), (50_334, 100_667), (100_668, 150_999)]


def _at_0009_with_0008_index(tmp_path, payloads: str) -> tuple[str, list[tuple]]:
    """A warehouse at 0009 holding the payloads `payloads` (an INSERT) and 0008's index of them,
    as a writer before 0010 wrote it; and that index's rows."""
    path = tmp_path / "old.duckdb"
    url = f"duckdb:///{path}"
    upgrade(url, "0009")
    old = duckdb.connect(str(path))
    try:
        old.execute(payloads)
        old.execute('INSERT INTO "node_token_index" SELECT DISTINCT "token_id", "source_id", "line_no" FROM '
                    '(SELECT "source_id", "line_no", unnest("response_token_ids") AS "token_id" FROM "node_payloads") '
                    'WHERE "token_id" IS NOT NULL ORDER BY ALL')
        return url, old.execute('SELECT * FROM "node_token_index" ORDER BY ALL').fetchall()
    finally:
        old.close()


def test_migration_0010_regroups_the_index_by_write_and_its_downgrade_unrolls_it(tmp_path):
    """0008's rows (one per token and node) become rows per token and write with the same
    entries, and the searches read them; the downgrade gives 0008's rows back."""
    url, before = _at_0009_with_0008_index(
        tmp_path, "INSERT INTO node_payloads (source_id, line_no, response_token_ids) VALUES "
                  "(1, 1, [5, 3, 5, NULL]), (1, 2, [3]), (2, 1, []), (2, 2, NULL), (3, 1, [7, 7, 3])")
    assert before == [(3, 1, 1), (3, 1, 2), (3, 3, 1), (5, 1, 1), (7, 3, 1)]
    assert upgrade(url, "0010") == "0010"
    with connect(url, read_only=True) as con:
        assert con.execute('SELECT * FROM "node_token_index" ORDER BY ALL').fetchall() == [
            (3, 1, [1, 1, 3], [1, 2, 1]), (5, 1, [1], [1]), (7, 1, [3], [1])]
        assert con.execute('SELECT * FROM "node_token_index_writes" ORDER BY ALL').fetchall() == [(1, 1), (1, 2), (1, 3)]
        assert sorted(con.execute(HELD).fetchall()) == before
        assert con.execute(f"SELECT * FROM ({tokens.HOLDERS}) ORDER BY ALL", [3]).fetchall() == [(1, 1), (1, 2), (3, 1)]
    migrate.downgrade(url, "0009")
    with connect(url, read_only=True) as con:
        assert con.execute('SELECT * FROM "node_token_index"').fetchall() == before
        assert not con.execute("SELECT * FROM duckdb_tables() WHERE table_name = 'node_token_index_writes'").fetchall()


def test_a_write_whose_sources_are_all_forgotten_loses_its_rows_and_its_id_holds_no_stale_entry(tmp_path):
    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    init_db(url)
    with connect(url) as con:
        con.execute("INSERT INTO node_payloads (source_id, line_no, response_token_ids) VALUES "
                    "(1, 1, [4, 5]), (2, 1, [5]), (3, 1, [5, 6])")
        tokens.write_index(con, '"node_payloads" WHERE "source_id" <= 2', [1, 2])
        tokens.write_index(con, '"node_payloads" WHERE "source_id" = 3', [3])
        assert con.execute('SELECT "write_id", "token_id" FROM "node_token_index" ORDER BY ALL').fetchall() == [
            (1, 4), (1, 5), (2, 5), (2, 6)]
        tokens.forget_sources(con, [3])  # write 2 has no source left: its rows go
        tokens.forget_sources(con, [2])  # write 1 keeps source 1: its rows stay, source 2's not read
        assert con.execute('SELECT "write_id", "token_id" FROM "node_token_index" ORDER BY ALL').fetchall() == [
            (1, 4), (1, 5)]
        assert con.execute(f"SELECT * FROM ({tokens.HOLDERS}) ORDER BY ALL", [5]).fetchall() == [(1, 1)]
        con.execute('DELETE FROM node_payloads WHERE source_id = 3')
        con.execute("INSERT INTO node_payloads (source_id, line_no, response_token_ids) VALUES (3, 1, [9])")
        tokens.write_index(con, '"node_payloads" WHERE "source_id" = 3', [3])  # write id 2 again
        assert con.execute(f"SELECT * FROM ({tokens.HOLDERS}) ORDER BY ALL", [6]).fetchall() == []
        assert con.execute(f"SELECT * FROM ({tokens.HOLDERS}) ORDER BY ALL", [9]).fetchall() == [(3, 1)]
        tokens.write_index(con, '"node_payloads" WHERE false', [])  # nothing to index: no write
        assert con.execute('SELECT max("write_id") FROM "node_token_index_writes"').fetchone()[0] == 2


def test_an_ingest_of_many_batches_leaves_one_write_with_its_batches_entries(tmp_path, monkeypatch):
    """Each batch commits its own index rows (a search in between finds them); the ingest
    then merges its batches' writes into one, in several passes, with the same entries, and
    leaves the writes of earlier ingests as they were."""
    monkeypatch.setattr(tokens, "ENTRIES_PER_MERGE", 300)
    root = write_sample_root(tmp_path / "root", payload_tokens=(20, 60))
    url = f"duckdb:///{tmp_path / 'wh.duckdb'}"
    init_db(url)
    runs = sorted(p for p in root.iterdir() if p.is_dir())
    first = tmp_path / "first"
    first.mkdir()
    shutil.move(str(runs[0]), first / runs[0].name)
    assert ingest_roots(url, [str(first)], batch_bytes=1).files_failed == 0
    with connect(url, read_only=True) as con:
        before = con.execute('SELECT * FROM "node_token_index" ORDER BY ALL').fetchall()
        (kept,), = con.execute('SELECT DISTINCT "write_id" FROM "node_token_index_writes"').fetchall()
    report = ingest_roots(url, [str(root)], batch_bytes=1)  # a batch per file
    assert report.files_failed == 0 and report.files_loaded > 3
    assert not [w for w in report.warnings if "token index" in w]
    _index_equals_its_payloads(url)
    with connect(url, read_only=True) as con:
        assert con.execute('SELECT count(DISTINCT "write_id") FROM "node_token_index_writes"').fetchone()[0] == 2
        assert con.execute('SELECT * FROM "node_token_index" WHERE "write_id" = ? ORDER BY ALL', [kept]).fetchall() == before


def test_a_token_held_by_more_nodes_than_a_row_holds_takes_consecutive_rows(tmp_path):
    url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    init_db(url)
    held = 2 * tokens.NODES_PER_ROW + 52
    with connect(url) as con:
        con.execute('INSERT INTO node_payloads (source_id, line_no, response_token_ids) '
                    'SELECT 1 + i // 1000, i % 1000, [5, i] FROM range(?) AS t(i)', [held])
        tokens.write_index(con, '"node_payloads"', [1, 2, 3])
        rows = con.execute('SELECT "source_ids", "line_nos" FROM "node_token_index" WHERE "token_id" = 5 '
                           'ORDER BY rowid').fetchall()
        assert [len(s) for s, _ in rows] == [tokens.NODES_PER_ROW, tokens.NODES_PER_ROW, 52]
        assert [k for s, n in rows for k in zip(s, n)] == sorted((1 + i // 1000, i % 1000) for i in range(held))
        assert len(con.execute(f"SELECT * FROM ({tokens.HOLDERS})", [5]).fetchall()) == held


def test_migration_0010_merges_its_chunks_into_one_write(tmp_path):
    """Enough payloads for several of the migration's chunks (512 payloads each): one write
    holds them all after it, with 0008's entries, and a token held by 1,300 nodes in two
    rows of at most 1,024."""
    url, before = _at_0009_with_0008_index(
        tmp_path, 'INSERT INTO node_payloads (source_id, line_no, response_token_ids) '
                  'SELECT 1 + i // 100, i % 100, [7, i % 13, NULL] FROM range(1300) AS t(i)')
    assert upgrade(url, "0010") == "0010"
    _index_equals_its_payloads(url)
    with connect(url, read_only=True) as con:
        assert sorted(con.execute(HELD).fetchall()) == before
        assert con.execute('SELECT DISTINCT "write_id" FROM "node_token_index_writes"').fetchall() == [(4,)]
        assert con.execute('SELECT DISTINCT "write_id" FROM "node_token_index"').fetchall() == [(4,)]
        assert con.execute('SELECT len("source_ids") FROM "node_token_index" WHERE "token_id" = 7 ORDER BY rowid'
                           ).fetchall() == [(1024,), (276,)]
        # the merged write replaced the chunks' table: no chunk row is left, deleted or not
        assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE 'node_token_index%'"
                           ).fetchone()[0] == 2
        assert con.execute('SELECT count(*) FROM "node_token_index"').fetchone()[0] == \
            con.execute("SELECT estimated_size FROM duckdb_tables() WHERE table_name = 'node_token_index'").fetchone()[0]


def test_an_upgrade_to_0010_killed_midway_builds_the_index_again_when_run_again(tmp_path):
    """The build commits chunk by chunk: a kill leaves the revision at 0009, 0008's index gone
    and a part-built one; the next upgrade drops it and builds the whole index from the
    payloads, the entries 0008 held."""
    url, before = _at_0009_with_0008_index(
        tmp_path, 'INSERT INTO node_payloads (source_id, line_no, response_token_ids) '
                  'SELECT 1 + i // 100, i % 100, [7, i % 13, NULL] FROM range(1300) AS t(i)')
    with connect(url) as con:  # what a kill after the first chunk's write leaves
        con.execute('DROP TABLE "node_token_index"')
        con.execute('CREATE TABLE "node_token_index_writes" ("write_id" INTEGER NOT NULL, "source_id" INTEGER NOT NULL)')
        con.execute('CREATE TABLE "node_token_index" ("token_id" INTEGER NOT NULL, "write_id" INTEGER NOT NULL, '
                    '"source_ids" INTEGER[] NOT NULL, "line_nos" INTEGER[] NOT NULL)')
        con.execute('INSERT INTO "node_token_index" VALUES (7, 1, [1, 2], [0, 0])')
        con.execute('INSERT INTO "node_token_index_writes" VALUES (1, 1), (1, 2)')
        # and a merge begun: its table of the merged write
        con.execute('CREATE TABLE "node_token_index_merging" AS SELECT * FROM "node_token_index"')
        assert con.execute('SELECT * FROM "alembic_version"').fetchall() == [("0009",)]
    assert upgrade(url, "0010") == "0010"
    _index_equals_its_payloads(url)
    with connect(url, read_only=True) as con:
        assert sorted(con.execute(HELD).fetchall()) == before
        assert con.execute('SELECT DISTINCT "write_id" FROM "node_token_index_writes"').fetchall() == [(4,)]
        assert not con.execute("SELECT * FROM duckdb_tables() WHERE table_name = 'node_token_index_merging'").fetchall()


def test_a_search_caches_less_while_it_reads_and_gives_the_budget_back(warehouse):
    """While the payloads are read (each row group once) DuckDB caches at most SCAN_SHARE of
    the budget; the connection has its whole budget again afterwards, and after a failed read."""
    from warehouse.config import memory_limit, memory_limit_bytes
    from warehouse.db import SCAN_SHARE
    from warehouse.tokens import find_token

    url, _ = warehouse
    token_id = _token_ids(url)[0][0]
    limit = "SELECT current_setting('memory_limit')"
    with connect(url, read_only=True) as con:
        before = con.execute(limit).fetchone()[0]
        during = []
        find_token(con, token_id, progress=lambda done, total: during.append(con.execute(limit).fetchone()[0]))
        assert con.execute(limit).fetchone()[0] == before and during
        half = con.execute(f"SET memory_limit = '{int(memory_limit_bytes(memory_limit()) * SCAN_SHARE)}B'; "
                           f"SELECT current_setting('memory_limit')").fetchone()[0]
        con.execute(f"SET memory_limit = '{memory_limit()}'")
        assert set(during) == {half} != {before}
        with pytest.raises(RuntimeError, match="stop"):
            find_token(con, token_id, progress=lambda done, total: (_ for _ in ()).throw(RuntimeError("stop")))
        assert con.execute(limit).fetchone()[0] == before
