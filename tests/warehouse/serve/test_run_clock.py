"""A run's own clock: its last activity (run_state) and the charts' wall-time axis (round_times)
come from its trainer's record or the time stamped in its round files' names, never from the
files' mtimes while the files carry a time. A downloaded root (every mtime the download's)
shows its runs' own times; a run whose files carry none shows the file time and every page
says so. Checked on the demo warehouse plus such a root, against the files' names read here."""
from __future__ import annotations

import os
import re
import shutil
from datetime import datetime, timezone

import pytest

from tests.warehouse.serve.conftest import add_round, sql
from tests.warehouse.serve.test_app import charts_of

DOWNLOADED = datetime(2030, 1, 2, 3, 4, 5)  # every file's mtime in the downloaded root
STAMPED, UNSTAMPED = "downloaded_run", "unstamped_run"


def stamp_of(path: str) -> int | None:
    """The epoch seconds in a round file's name (docs/data-roots.md), as ingest's walk reads them."""
    from ingest.discover import NODE_FILE, SUMMARY_FILE, TRANSCRIPT_FILE, TREE_FILE

    name = os.path.basename(path)
    match = next((m for p in (NODE_FILE, SUMMARY_FILE, TREE_FILE, TRANSCRIPT_FILE) if (m := p.match(name))), None)
    return int(match["ts"]) if match else None


def utc(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc).replace(tzinfo=None)


@pytest.fixture(scope="module")
def url(demo_url, tmp_path_factory) -> str:
    """The demo plus a downloaded root: one of its runs copied twice, once as is and once as a
    harness that numbers its files instead of stamping them, every mtime the download's."""
    from ingest.pipeline import ingest_roots

    original = sql(demo_url, 'SELECT "source_path" FROM "runs" WHERE "run_id" = ?', "20260701_231713")[0][0]
    root = tmp_path_factory.mktemp("downloaded")
    shutil.copytree(original, root / STAMPED)
    shutil.copytree(original, root / UNSTAMPED)
    for path in [p for p in (root / UNSTAMPED).rglob("*") if p.is_file()]:
        path.rename(path.with_name(re.sub(r"__(summary_)?\d+", r"__\g<1>7", path.name)))
    when = DOWNLOADED.replace(tzinfo=timezone.utc).timestamp()
    for path in root.rglob("*"):
        os.utime(path, (when, when))
    report = ingest_roots(demo_url, [str(root)])
    assert (report.files_failed, report.errors) == (0, [])
    return demo_url


@pytest.fixture(scope="module")
def client(url):
    from starlette.testclient import TestClient

    from warehouse.serve.app import create_app

    with TestClient(create_app(url)) as c:
        yield c


def newest_stamp(url: str, run_id: str, round: int | None = None) -> datetime | None:
    paths = sql(url, 'SELECT "path" FROM "sources" WHERE "run_id" = ? AND "round" IS NOT NULL '
                     'AND (CAST(? AS INTEGER) IS NULL OR "round" = ?)', run_id, round, round)
    stamps = [s for (p,) in paths if (s := stamp_of(p)) is not None]
    return utc(max(stamps)) if stamps else None


def test_a_downloaded_root_shows_its_runs_own_last_activity_not_the_download(url):
    state = {r[0]: r[1:] for r in sql(url, 'SELECT "run_id", "last_activity_at", "last_activity_from" FROM "run_state"')}
    assert state[STAMPED] == (newest_stamp(url, STAMPED), "file names")
    assert state[STAMPED][0] < DOWNLOADED
    assert state[UNSTAMPED] == (DOWNLOADED, "file time")  # "__7" is no time: only the mtime is left
    imported = [r for (r,) in sql(url, 'SELECT "run_id" FROM "run_state" WHERE "state" = \'imported\'')]
    with_rounds = [r for r in imported if newest_stamp(url, r) is not None and r != UNSTAMPED]
    assert len(with_rounds) >= 10
    for run_id in with_rounds:  # every demo run too: its mtimes are the demo's build, not its own time
        assert state[run_id] == (newest_stamp(url, run_id), "file names"), run_id


def test_a_run_the_trainer_wrote_has_the_trainers_time(url):
    before = datetime.now(timezone.utc).replace(tzinfo=None)
    add_round(url, "committed_run", ["cactus"], 1)
    after = datetime.now(timezone.utc).replace(tzinfo=None)
    at, source = sql(url, 'SELECT "last_activity_at", "last_activity_from" FROM "run_state" WHERE "run_id" = ?',
                     "committed_run")[0]
    assert source == "trainer" and before <= at <= after
    assert sql(url, 'SELECT "written_from" FROM "round_times" WHERE "run_id" = ?', "committed_run") == [("trainer",)]


def test_runs_page_marks_a_file_time_and_says_whose_clock_each_time_is(client, url):
    html = client.get("/").text

    def activity(run_id):
        row = re.search(rf'<tr data-run="{re.escape(run_id)}".*?</tr>', html, re.S).group(0)
        return re.search(r'<td data-col="activity".*?</td>', row, re.S).group(0)

    stamped = activity(STAMPED)
    assert 'data-from="file names"' in stamped and "round files&#39; names" in stamped
    assert newest_stamp(url, STAMPED).strftime("%Y-%m-%d %H:%M") in stamped and "(file time)" not in stamped
    unstamped = activity(UNSTAMPED)
    assert 'data-from="file time"' in unstamped and '<small class="file-time">(file time)</small>' in unstamped
    assert "2030-01-02 03:04" in unstamped and "not the run&#39;s own clock" in unstamped


def test_run_page_says_whose_clock_its_last_activity_is(client):
    stamped = client.get(f"/runs/{STAMPED}").text.split('id="run-life"')[1].split("</p>")[0]
    assert 'data-from="file names"' in stamped and "round files&#39; names" in stamped
    unstamped = client.get(f"/runs/{UNSTAMPED}").text.split('id="run-life"')[1].split("</p>")[0]
    assert "last activity 2030-01-02 03:04:05 UTC" in unstamped and "(file time)" in unstamped


def test_wall_axis_is_each_rounds_own_time_and_says_when_it_is_a_file_time(client, url):
    for run_id, source in ((STAMPED, "file names"), (UNSTAMPED, "file time")):
        trace = charts_of(client.get(f"/runs/{run_id}").text)["task-0-4"]["data"][0]
        rounds = trace["meta"]["xs"]["round"]
        expected = [newest_stamp(url, run_id, r) if source == "file names" else DOWNLOADED for r in rounds]
        assert trace["meta"]["xs"]["wall"] == [e.isoformat() for e in expected]
        assert trace["meta"]["wall_from"] == [source]
