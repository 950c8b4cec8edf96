"""`warehouse serve` on DuckLake: one attached lake shared by every request.

200 requests at once all answer 200 (the dashboard attached the lake per request and left
108 of 200 unanswered after 120 s); answers are kept per snapshot, so a round committed
meanwhile shows on the next request; the pages read the same as on the file. No timing is
asserted: benchmarks/serve_bench.py measures the latencies."""
from __future__ import annotations

import threading
import urllib.request

import pytest

from tests.warehouse.serve.conftest import _record
from warehouse.config import resolve_db_url


def lake_copy(demo_url: str, tmp) -> str:
    from warehouse.transfer import migrate_to

    url = resolve_db_url(f"ducklake:sqlite:{tmp / 'catalog.sqlite'}", tmp / "files")
    migrate_to(demo_url, url)
    return url


@pytest.fixture(scope="module")
def lake_url(demo_url, tmp_path_factory) -> str:
    """The demo warehouse in DuckLake, read only by these tests."""
    return lake_copy(demo_url, tmp_path_factory.mktemp("lake"))


@pytest.fixture(scope="module")
def runs(demo_url) -> list[str]:
    from warehouse.query import run_query

    return [r[0] for r in run_query(demo_url, 'SELECT "run_id" FROM "run_metrics" ORDER BY 1').rows]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=600) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_200_concurrent_requests_all_answer(lake_url, runs):
    from warehouse.serve.lake import POOL_SIZE, pool
    from warehouse.serve.server import background

    paths = ["/", f"/runs/{runs[0]}", f"/compare?run={runs[0]}&run={runs[1]}", "/quality",
             f"/api/runs/{runs[0]}/version"]
    statuses = [None] * 200
    with background(lake_url) as base:
        start = threading.Barrier(len(statuses))

        def fetch(i: int) -> None:
            start.wait()
            statuses[i] = get(base + paths[i % len(paths)])[0]

        threads = [threading.Thread(target=fetch, args=(i,)) for i in range(len(statuses))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cursors = pool(lake_url)._made
    assert statuses == [200] * len(statuses)
    assert 1 <= cursors <= POOL_SIZE  # a bounded pool on one attached lake, not one per request


def test_a_round_committed_meanwhile_shows_on_the_next_request(demo_url, tmp_path):
    from train.writer import RoundWrite, RunRow, commit_round
    from warehouse.serve.server import background

    lake_url = lake_copy(demo_url, tmp_path)
    run = "lake_live_probe"
    with background(lake_url) as base:
        assert get(f"{base}/runs/{run}")[0] == 404
        before = get(f"{base}/api/runs/{run}/version")[1]
        records = {"cactus": [_record(run, 1, "cactus", i) for i in range(4)]}
        commit_round(lake_url, RunRow(run, None, None, "test", 0), RoundWrite(1, records, {"cactus": None}))
        after = get(f"{base}/api/runs/{run}/version")[1]
        status, page = get(f"{base}/runs/{run}")
    assert after != before
    assert status == 200 and run in page


def test_pages_read_the_same_on_the_lake_as_on_the_file(lake_url, demo_url, runs):
    from warehouse.serve import data

    for fn in (lambda u: data.runs_page(u).runs, lambda u: data.run_version(u, runs[0]),
               lambda u: data.compare_page(u, runs[:2], []).series,
               lambda u: data.run_page(u, runs[0]).steps):
        assert fn(lake_url) == fn(demo_url)
        assert fn(lake_url) == fn(lake_url)  # the kept answers equal the first read


def test_kept_answers_are_bounded_by_cells_most_recently_used_first():
    from warehouse.serve.lake import Answer, Answers

    answers = Answers(cells=100)
    description = [("a",), ("b",)]
    for i in range(6):  # 10 rows x 2 columns = 20 cells each: five fit
        if i == 5:
            assert answers.get((1, "q0", ())) is not None  # q0 read again: now the newest
        answers.put((1, f"q{i}", ()), Answer(description, [(i, i)] * 10))
    assert answers.kept_cells == 100
    assert answers.get((1, "q1", ())) is None  # the least recently used went
    assert [answers.get((1, f"q{i}", ())) is not None for i in (0, 2, 3, 4, 5)] == [True] * 5
    answers.put((1, "big", ()), Answer(description, [(0, 0)] * 13))  # 26 cells > a quarter
    assert answers.get((1, "big", ())) is None
    assert answers.get((2, "q5", ())) is None  # another snapshot is another answer


def test_the_run_page_read_on_two_readers_equals_it_read_on_one(lake_url, demo_url, runs):
    """The run page reads its run_metrics row on a second reader at once with the rest
    (data.beside): the same page as on one reader, on the lake and the file; an unknown run
    is still a 404."""
    from warehouse.serve import data

    def steady(page):  # less the seconds since a live run's last beat: run_state reads them off the clock
        page.life.pop("silent_s", None)
        page.data.life.pop("silent_s", None)
        return page

    for url in (lake_url, demo_url):
        for run in runs[:3]:
            with data.reading(url) as con:
                alone = steady(data._run_page(con, run))
            assert steady(data.run_page(url, run)) == alone
            assert steady(data.any_run_page(url, run)) == alone
        with pytest.raises(data.NotFoundError):
            data.run_page(url, "no_such_run")


def test_a_second_lake_reader_is_on_the_first_ones_snapshot_or_none(demo_url, tmp_path):
    """LakePool.beside: a free cursor on the request's snapshot; none when every cursor is
    taken (a request never waits for a second one) or a commit landed since the request began."""
    from train.writer import RoundWrite, RunRow, commit_round
    from warehouse.serve.lake import LakePool

    url = lake_copy(demo_url, tmp_path)
    one, two = LakePool(url, size=1), LakePool(url, size=2)
    try:
        with one.cursor() as reader, one.beside(reader) as other:
            assert other is None
        with two.cursor() as reader:
            with two.beside(reader) as other:
                assert other is not None and other.snapshot == reader.snapshot
                assert other.execute("SELECT count(*) FROM nodes").fetchone() == \
                    reader.execute("SELECT count(*) FROM nodes").fetchone()
            records = {"cactus": [_record("beside_probe", 1, "cactus", i) for i in range(2)]}
            commit_round(url, RunRow("beside_probe", None, None, "test", 0), RoundWrite(1, records, {"cactus": None}))
            with two.beside(reader) as other:
                assert other is None
        with two.cursor() as reader, two.beside(reader) as other:  # both on the new snapshot
            assert other is not None and other.snapshot == reader.snapshot
    finally:
        one.close()
        two.close()
