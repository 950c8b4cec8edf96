"""train.rm.publish: each flush is one warehouse.db.transaction, redone when DuckLake says the
commit lost to another writer's (as every trainer write is)."""
from __future__ import annotations

from train.rm.publish import Publisher


def test_a_flush_that_loses_a_ducklake_commit_race_is_redone_and_lands_once(tmp_path):
    from warehouse.config import resolve_db_url
    from warehouse.db import connect
    from warehouse.migrate import init_db

    url = resolve_db_url(f"ducklake:sqlite:{tmp_path / 'lake.sqlite'}", tmp_path / "files")
    init_db(url)
    pub = Publisher(run_id="rm_race", job="formal", phase="formal", db_url=url, run_dir=tmp_path,
                    export_root=None, scratch=None, job_row={"job": "formal", "phase": "formal"})
    attempts = []

    def write(con, api):
        api.write_jobs(con, "rm_race", [pub.job_row])
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:  # what DuckLake raises when another writer committed first
            raise RuntimeError("TransactionContext Error: Failed to commit DuckLake transaction: conflict")

    pub._commit(write)
    assert attempts == [1, 2]
    with connect(url, read_only=True) as con:
        assert con.execute('SELECT "run_id", "job", "phase" FROM "rm_jobs"').fetchall() == [("rm_race", "formal", "formal")]
        assert con.execute("SELECT count(*) FROM sources WHERE kind = 'rm_jobs'").fetchone() == (1,)
