"""The live-BI recipe of docs/bi.md: a SQLAlchemy client (duckdb-engine) that attaches a DuckLake
warehouse read-only on connect, read with pandas while a writer commits rounds into the same
warehouse (a `ducklake:sqlite:` catalog here). The recipe's code block runs as written, with
only its CATALOG path pointed at this test's catalog. A reader never blocks the writer: the
writer commits while a reader holds an open connection and transaction, and every read taken
during a writer loop sees whole rounds only. The writer is a stand-in committing through
`train run`'s own write path, and, once, `train run` itself."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from warehouse.config import resolve_db_url

REPO = Path(__file__).resolve().parents[2]
MARK = "<!-- the live-BI recipe: tests/warehouse/test_bi_live.py runs this block as written -->"
TASKS = ("cactus", "dogs")
NODES_PER_TASK = 4
WRITER = """
import sys
from tests.warehouse.serve.conftest import _record
from train.writer import RoundWrite, RunRow, commit_round

url, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for k in range(first, last + 1):
    records = {t: [_record("live", k, t, i) for i in range(%d)] for t in %r}
    commit_round(url, RunRow("live", None, None, "test", 0), RoundWrite(k, records, {t: None for t in %r}))
""" % (NODES_PER_TASK, TASKS, TASKS)


def recipe_code(catalog: Path) -> str:
    text = (REPO / "docs" / "bi.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text[text.index(MARK):], re.S).group(1)
    code, n = re.subn(r'^CATALOG = ".*?"', f"CATALOG = {str(catalog)!r}", block, flags=re.M)
    assert n == 1, "the recipe names its catalog in one CATALOG line"
    return code


def write_rounds(url: str, first: int, last: int) -> subprocess.Popen:
    """A writer in its own process, as `train run` is, committing rounds first..last."""
    return subprocess.Popen([sys.executable, "-c", WRITER, url, str(first), str(last)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(writer: subprocess.Popen) -> None:
    _, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err


@pytest.fixture
def lake(tmp_path):
    from warehouse.migrate import init_db

    catalog = tmp_path / "catalog.sqlite"
    url = resolve_db_url(f"ducklake:sqlite:{catalog}", tmp_path / "files")
    init_db(url)
    finish(write_rounds(url, 1, 1))
    return url, catalog


def run_recipe(catalog: Path) -> dict:
    namespace: dict = {}
    exec(compile(recipe_code(catalog), "docs/bi.md", "exec"), namespace)
    return namespace


def node_count(connection) -> int:
    import pandas as pd
    import sqlalchemy as sa

    return int(pd.read_sql(sa.text("SELECT count(*) AS n FROM nodes"), connection)["n"][0])


def test_the_recipe_reads_the_views_through_pandas(lake):
    _, catalog = lake
    rounds = run_recipe(catalog)["rounds"]
    assert list(rounds.columns[:3]) == ["run_id", "round", "nodes"]
    assert rounds[["run_id", "round", "nodes"]].values.tolist() == [["live", 1, NODES_PER_TASK * len(TASKS)]]


def test_a_reader_holding_its_connection_never_blocks_a_writer(lake):
    url, catalog = lake
    engine = run_recipe(catalog)["engine"]
    per_round = NODES_PER_TASK * len(TASKS)
    with engine.connect() as connection:
        transaction = connection.begin()
        assert node_count(connection) == per_round
        finish(write_rounds(url, 2, 2))  # commits while this reader's transaction is open
        assert node_count(connection) == per_round  # the reader's snapshot is unchanged
        transaction.commit()
        assert node_count(connection) == 2 * per_round  # the next transaction sees round 2


def test_reads_during_a_writer_loop_see_only_whole_rounds(lake):
    import pandas as pd
    import sqlalchemy as sa

    url, catalog = lake
    engine = run_recipe(catalog)["engine"]
    writer, seen = write_rounds(url, 2, 4), []
    query = sa.text('SELECT "round", count(*) AS "nodes" FROM nodes WHERE run_id = \'live\' GROUP BY ALL ORDER BY ALL')
    while True:
        done = writer.poll() is not None  # one more read after the writer ends
        with engine.connect() as connection:
            frame = pd.read_sql(query, connection)
        rounds = frame["round"].tolist()
        assert rounds == list(range(1, len(rounds) + 1)), rounds  # no round missing in between
        assert set(frame["nodes"]) == {NODES_PER_TASK * len(TASKS)}, frame  # no half-written round
        seen.append(len(rounds))
        if done:
            break
        time.sleep(0.3)  # leave the writer some of the machine's cores
    finish(writer)
    assert seen == sorted(seen) and seen[-1] == 4  # never back in time; the last read sees all


def test_train_run_commits_its_rounds_while_a_reader_holds_its_connection(lake, tmp_path):
    # the recipe's client against the real writer: `train run` (the tiny policy, two short rounds,
    # nodes in the sandbox) commits both rounds, never spooling, while a reader's transaction
    # stays open on its snapshot; the reader's next transaction sees both rounds
    import shutil

    import pandas as pd
    import sqlalchemy as sa

    from tests.isolation import lacking

    if shutil.which("bwrap") is None:
        lacking("train run needs bubblewrap to execute the policy's code")
    url, catalog = lake
    engine = run_recipe(catalog)["engine"]
    query = sa.text("SELECT \"round\", count(*) AS n FROM nodes WHERE run_id = 'bi_live' GROUP BY ALL ORDER BY ALL")
    with engine.connect() as connection:
        transaction = connection.begin()
        before = node_count(connection)
        trainer = subprocess.run(
            [sys.executable, "-m", "train.cli", "run", "--model", "tiny", "--rounds", "2", "--db", url,
             "--run-id", "bi_live", "--tasks", "mini-tabular-accuracy", "--set", "siblings_per_expansion=2",
             "--set", "expansions_per_round=1", "--set", "response_cap=32", "--exec-workers", "1",
             "--no-health-gate", "--quiet", "--checkpoint-dir", str(tmp_path / "ckpt")],
            cwd=REPO, capture_output=True, text=True, timeout=900)
        assert trainer.returncode == 0, trainer.stdout + trainer.stderr  # 3 would be a spooled round
        assert node_count(connection) == before  # the open snapshot is unchanged
        transaction.commit()
        frame = pd.read_sql(query, connection)
    assert frame.values.tolist() == [[1, 2], [2, 2]]
