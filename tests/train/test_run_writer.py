"""train.writer: one transaction per round, spool when locked, export that ingests to the same rows."""
from __future__ import annotations

import json

import pytest

from tests.train.rollout.conftest import tiny_model, tiny_tokenizer  # noqa: F401 - shared fixtures
from tests.train.test_run import model_dir  # noqa: F401 - shared fixture
from train.generate.base import Completion
from train.learn.store import step_metrics_record
from train.rollout.records import node_records, task_round_summary
from train.rollout.tree import SearchSettings, TaskTree, plan_expansion
from train.writer import RoundWrite, RoundWriter, RunIdTakenError, RunRow, commit_round

RUN_ID = "20261129_080000_hr24k_u6"
TASKS = ("mini-a", "mini-b")


def _env(i: int) -> dict:
    ok = i % 3 != 0
    metric = 0.5 + i / 100 if ok else None
    return {"code": f"print({i})", "plan": "p", "status": "ok" if ok else "crashed",
            "exc_type": None if ok else "ValueError", "is_buggy": not ok, "reward": 0.1 * (i % 5) if ok else -0.5,
            "test_metric": metric, "oriented": metric, "source": "grade" if ok else None, "grade_error": None,
            "medal": None, "exec_time": 1.5, "exec_timings": {"pending": 0.0, "stage": 0.1, "exec": 1.3, "retrieve": 0.1},
            "term_tail": "done", "returncode": 0 if ok else 1, "where": "local:x", "cpu_util_mean": 50.0,
            "cpu_util_peak": 90.0, "mem_peak_gi": 0.2, "gpu_util": None, "gpu_util_peak": None,
            "gpu_mem_used_gi": None, "gpu_name": None, "kube_node": None, "outcome": "exited", "disk_peak_gi": 0.01,
            "limits": {"timeout_s": 600.0, "mem_gi": 8.0, "disk_gi": 2.0, "cpus": 1}, "resources": None,
            "decl_malformed": False, "decl_miss_reason": None, "decl_deps_ignored": False, "attempt": 1}


def _round(trees: dict, rnd: int, siblings: int = 4) -> RoundWrite:
    records, summaries = {}, {}
    for task in TASKS:
        exp = plan_expansion(trees[task], "# t", rnd, 0, SearchSettings(siblings=siblings), run_seed=0)
        comps = [Completion(exp.messages, f"```python\nprint({i})\n```", None, [5, 6, i], [-0.1, -0.2, -0.3])
                 for i in range(siblings)]
        recs = node_records(exp, comps, [_env(i) for i in range(siblings)])
        trees[task].add(recs)
        records[task] = recs
        summaries[task] = task_round_summary(task, rnd, recs, model="tiny", expansions=1, buffer_nodes=len(trees[task].nodes),
                                             gen_llm_seconds=1.0, gen_exec_seconds=2.0, rollout_file="x", workspace="y")
    return RoundWrite(rnd, records, summaries, {"step": rnd, "total_s": 3.0, "phases_s": {"gen": 2.0, "update_actor": 1.0}},
                      step_metrics_record(rnd, {"loss": 0.5 / rnd, "kl": 0.01 * rnd, "tokens": 24, "update_variant": "sac"}))


def _run_row(seed: int = 0) -> RunRow:
    return RunRow(RUN_ID, "hr24k_u6", "09-multitask-humanrank", "tiny", seed, {"response_cap": 256, "tasks": list(TASKS)},
                  "bundled tasks", sources={"tasks": "flag"})


def _rows(db_url: str, sql: str) -> list:
    from warehouse.db import connect

    with connect(db_url, read_only=True) as con:
        return con.execute(sql).fetchall()


NODE_COLUMNS = "run_id, round, task, node_id, parent_id, sibling_group, mode, status, reward, test_metric, depth, " \
               "exec_exec_s, n_response_tokens, schema_kind, group_best, parent_P, line_no"
PAYLOAD = "SELECT n.node_id, p.code, p.raw_completion, p.response_token_ids, p.response_logprobs, " \
          "p.prompt_messages FROM nodes n JOIN node_payloads p USING (source_id, line_no) ORDER BY 1"


def test_rounds_land_in_the_warehouse_with_run_row_and_steps(db_url, tmp_path):
    trees = {t: TaskTree(t) for t in TASKS}
    writer = RoundWriter(db_url, _run_row())
    assert writer.write(_round(trees, 1)) == "db"
    assert writer.write(_round(trees, 2)) == "db"
    counts = _rows(db_url, "SELECT round, task, count(*), count(DISTINCT sibling_group) FROM nodes GROUP BY ALL ORDER BY 1, 2")
    assert counts == [(1, "mini-a", 4, 1), (1, "mini-b", 4, 1), (2, "mini-a", 4, 1), (2, "mini-b", 4, 1)]
    run = _rows(db_url, "SELECT arm, kind, seed, model, overrides FROM runs")
    assert run[0][:4] == ("hr24k_u6", "training", 0, "tiny")
    assert json.loads(run[0][4]) == {"response_cap": 256, "tasks": list(TASKS)}
    assert _rows(db_url, "SELECT step, total_s, gen_s FROM steps ORDER BY step") == [(1, 3.0, 2.0), (2, 3.0, 2.0)]
    assert _rows(db_url, "SELECT step, loss, kl, tokens, extra FROM step_metrics ORDER BY step") == [
        (1, 0.5, 0.01, 24, '{"update_variant":"sac"}'), (2, 0.25, 0.02, 24, '{"update_variant":"sac"}')]
    summary = _rows(db_url, "SELECT nodes, valid, gen_llm_seconds FROM task_rounds WHERE round = 1 AND task = 'mini-a'")
    assert summary == [(4, 2, 1.0)]  # siblings 1, 2 ok; 0, 3 crashed
    # the sandbox's own fields, beyond the published roots' columns, are kept with the node
    extra = json.loads(_rows(db_url, "SELECT extra FROM nodes ORDER BY round, task, line_no LIMIT 1")[0][0])
    assert (extra["outcome"], extra["disk_peak_gi"], extra["limits"]["mem_gi"]) == ("exited", 0.01, 8.0)


def test_a_failure_mid_round_leaves_no_partial_round(db_url, monkeypatch):
    import ingest.records

    trees = {t: TaskTree(t) for t in TASKS}
    real = ingest.records.load_task_round
    calls = []

    def fail_second(con, **kw):
        calls.append(kw["task"])
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return real(con, **kw)

    monkeypatch.setattr(ingest.records, "load_task_round", fail_second)
    with pytest.raises(RuntimeError):
        commit_round(db_url, _run_row(), _round(trees, 1))
    assert _rows(db_url, "SELECT count(*) FROM nodes") == [(0,)]
    assert _rows(db_url, "SELECT count(*) FROM runs") == [(0,)]
    assert _rows(db_url, "SELECT count(*) FROM step_metrics") == [(0,)]


def test_a_round_commit_checkpoints_rather_than_logging_the_round(db_url, monkeypatch):
    """The round's commit writes it into the file at once (warehouse.db.checkpoint_each_commit):
    no WAL is left behind it before the connection closes, and the round is there."""
    import os

    import warehouse.db
    from warehouse.config import db_path_from_url

    wal = db_path_from_url(db_url) + ".wal"
    real = warehouse.db.transaction
    seen = []

    def transaction(con, work, **kw):
        out = real(con, work, **kw)
        seen.append(os.path.getsize(wal) if os.path.exists(wal) else 0)
        return out

    monkeypatch.setattr(warehouse.db, "transaction", transaction)
    trees = {t: TaskTree(t) for t in TASKS}
    commit_round(db_url, _run_row(), _round(trees, 1), claim=True)
    assert seen == [0]
    assert _rows(db_url, "SELECT count(*) > 0 FROM nodes WHERE round = 1") == [(True,)]


def test_locked_warehouse_spools_the_round_and_says_how_to_ingest(db_url, tmp_path):
    import duckdb

    from warehouse.config import db_path_from_url

    import multiprocessing

    holder = duckdb.connect(db_path_from_url(db_url))  # the lock another writer would hold
    try:
        with multiprocessing.get_context("spawn").Pool(1) as pool:  # DuckDB locks per process
            where, said = pool.apply(_write_in_child, (db_url, str(tmp_path / "spool")))
    finally:
        holder.close()
    assert where == "spool"
    spooled = list((tmp_path / "spool" / RUN_ID / "round_1").glob("mini-a__*.jsonl"))
    assert len(spooled) == 1 and len(spooled[0].read_text().splitlines()) == 4
    assert (tmp_path / "spool" / "manifest.toml").is_file()
    assert f"ingest {tmp_path / 'spool'}" in said[0]
    assert _rows(db_url, "SELECT count(*) FROM nodes") == [(0,)]
    assert [json.loads(line)["step"] for line in (tmp_path / "spool" / RUN_ID / "timing.jsonl").read_text().splitlines()] == [1]
    spooled_metrics = (tmp_path / "spool" / RUN_ID / "step_metrics.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in spooled_metrics] == [_round({t: TaskTree(t) for t in TASKS}, 1).metrics]


def test_a_spooled_round_ingested_later_completes_the_run_without_duplicates(db_url, tmp_path, monkeypatch):
    import train.writer
    from ingest.pipeline import ingest_roots
    from warehouse.errors import DatabaseLockedError

    trees = {t: TaskTree(t) for t in TASKS}
    writer = RoundWriter(db_url, _run_row(), spool_root=tmp_path / "spool", log=lambda line: None)
    real = train.writer.commit_round

    def locked_for_round_2(url, run, rnd, wait, **kw):
        if rnd.round == 2:
            raise DatabaseLockedError("locked")
        return real(url, run, rnd, wait, **kw)

    monkeypatch.setattr(train.writer, "commit_round", locked_for_round_2)
    assert [writer.write(_round(trees, r)) for r in (1, 2, 3)] == ["db", "spool", "db"]
    ingest_roots(db_url, [str(tmp_path / "spool")], [str(tmp_path / "spool" / "manifest.toml")])
    assert _rows(db_url, "SELECT round, count(*) FROM nodes GROUP BY 1 ORDER BY 1") == [(1, 8), (2, 8), (3, 8)]
    assert _rows(db_url, "SELECT step FROM steps ORDER BY 1") == [(1,), (2,), (3,)]
    assert _rows(db_url, "SELECT step, loss FROM step_metrics ORDER BY 1") == [(1, 0.5), (2, 0.25), (3, 0.5 / 3)]


def test_a_second_run_with_the_same_id_is_refused_and_the_first_keeps_its_rows(db_url):
    first = RoundWriter(db_url, _run_row(seed=1))
    first.claim()
    assert first.write(_round({t: TaskTree(t) for t in TASKS}, 1)) == "db"
    second = RoundWriter(db_url, _run_row(seed=2))
    with pytest.raises(RunIdTakenError, match=f"run {RUN_ID} is already in the warehouse.*--run-id"):
        second.claim()
    with pytest.raises(RunIdTakenError):  # nor can a round of the second slip in without a claim
        commit_round(db_url, second.run, _round({t: TaskTree(t) for t in TASKS}, 1), claim=True)
    assert _rows(db_url, "SELECT seed FROM runs") == [(1,)]
    assert _rows(db_url, "SELECT count(*) FROM nodes") == [(8,)]


def test_rewriting_a_round_of_ones_own_run_is_idempotent(db_url):
    trees = {t: TaskTree(t) for t in TASKS}
    writer = RoundWriter(db_url, _run_row())
    writer.claim()
    rnd = _round(trees, 1)
    before = None
    for _ in range(2):
        assert writer.write(rnd) == "db"
        after = _rows(db_url, f"SELECT {NODE_COLUMNS} FROM nodes ORDER BY ALL")
        assert before is None or after == before
        before = after
    assert len(before) == 8 and _rows(db_url, "SELECT count(*) FROM runs") == [(1,)]
    assert _rows(db_url, "SELECT count(*) FROM steps") == [(1,)]


def test_a_claim_blocked_by_the_lock_is_made_by_the_first_commit(db_url, tmp_path, monkeypatch):
    import train.writer
    from warehouse.errors import DatabaseLockedError

    def locked(*args, **kw):
        raise DatabaseLockedError("locked")

    said = []
    monkeypatch.setattr(train.writer, "claim_run", locked)
    writer = RoundWriter(db_url, _run_row(seed=3), spool_root=tmp_path / "spool", log=said.append)
    writer.claim()
    assert "not yet recorded" in said[0] and not writer.claimed
    assert writer.write(_round({t: TaskTree(t) for t in TASKS}, 1)) == "db"
    assert _rows(db_url, "SELECT seed FROM runs") == [(3,)]
    other = RoundWriter(db_url, _run_row(seed=4), spool_root=tmp_path / "spool", log=said.append)
    other.claim()  # locked too; its first round finds the id taken: refused, spooled, not merged
    with pytest.raises(RunIdTakenError, match="spooled to"):
        other.write(_round({t: TaskTree(t) for t in TASKS}, 2))
    assert other.spooled == [2] and list((tmp_path / "spool" / RUN_ID / "round_2").glob("*.jsonl"))
    assert _rows(db_url, "SELECT round, count(*) FROM nodes GROUP BY 1") == [(1, 8)]
    assert _rows(db_url, "SELECT seed FROM runs") == [(3,)]


def _write_in_child(db_url: str, spool: str) -> tuple[str, list]:
    said: list = []
    writer = RoundWriter(db_url, _run_row(), spool_root=spool, lock_wait_s=0.3, log=said.append)
    return writer.write(_round({t: TaskTree(t) for t in TASKS}, 1)), said


def test_export_then_ingest_yields_the_same_rows(db_url, tmp_path):
    from ingest.pipeline import ingest_roots
    from warehouse.migrate import init_db

    trees = {t: TaskTree(t) for t in TASKS}
    writer = RoundWriter(db_url, _run_row(), export_root=tmp_path / "export")
    for rnd in (1, 2):
        writer.write(_round(trees, rnd))
    other = f"duckdb:///{tmp_path / 'other.duckdb'}"
    init_db(other)
    report = ingest_roots(other, [str(tmp_path / "export")], [str(tmp_path / "export" / "manifest.toml")])
    assert report.rows_rejected == 0 and not report.errors
    for sql in (f"SELECT {NODE_COLUMNS} FROM nodes ORDER BY run_id, round, task, line_no", PAYLOAD,
                "SELECT run_id, round, task, sibling_group, expansion_step, parent_id, size FROM sibling_groups ORDER BY ALL",
                "SELECT run_id, round, task, nodes, valid, best_node_id, best_test_metric, gen_llm_seconds, "
                "gen_exec_seconds, buffer_nodes FROM task_rounds ORDER BY ALL",
                "SELECT run_id, arm, kind, seed, model, overrides, question_id, settings_sources FROM runs",
                "SELECT run_id, step, total_s, gen_s, update_actor_s FROM steps ORDER BY ALL",
                "SELECT * FROM step_metrics ORDER BY ALL"):
        trained, ingested = _rows(db_url, sql), _rows(other, sql)
        assert trained and trained == ingested, sql


# --- `train run` with a spooled round: exit 3, one line, a command that loads it losslessly -----

#: What tells a spooled-then-loaded round from a committed one by where it came from, not by
#: what it holds (source ids and paths; the spool also has the rendered tree and transcript).
PROVENANCE = {"source_id", "node_source_id", "summary_source_id", "source_path", "has_tree", "has_transcript"}
CONTENT_TABLES = ("runs", "rounds", "task_rounds", "sibling_groups", "nodes", "steps", "step_metrics")


def _content(db_url: str) -> dict:
    """Every row of the trainer's tables (and the payloads by node), provenance left out."""
    from warehouse.db import connect

    out = {}
    with connect(db_url, read_only=True) as con:
        for table in CONTENT_TABLES:
            cols = [d[0] for d in con.execute(f'SELECT * FROM "{table}" LIMIT 0').description]
            keep = ", ".join(f'"{c}"' for c in cols if c not in PROVENANCE)
            out[table] = con.execute(f'SELECT {keep} FROM "{table}" ORDER BY ALL').fetchall()
        out["node_payloads"] = con.execute(PAYLOAD.replace("n.node_id,", "n.round, n.task, n.node_id,")
                                           .replace("ORDER BY 1", "ORDER BY ALL")).fetchall()
        out["node_train_tokens"] = con.execute(
            'SELECT n."round", n."task", n."node_id", t.* EXCLUDE ("source_id") FROM "node_train_tokens" t '
            'JOIN "nodes" n USING ("source_id", "line_no") ORDER BY ALL').fetchall()
    return out


@pytest.mark.parametrize("refusal", ["locked", "disk_full"])
def test_a_spooled_run_exits_3_with_the_command_that_loads_it_losslessly(db_url, tmp_path, monkeypatch,
                                                                         model_dir, refusal):
    """Round 2 refused by a lock, or by the warehouse's full disk (DuckDB's ENOSPC; the real
    full tmpfs: test_a_full_warehouse_disk_spools_the_rounds_...)."""
    import shlex

    from click.testing import CliRunner

    import train.run
    import train.writer
    from tests.train.test_run import TASK, CannedBackend
    from train.cli import main as train_main
    from warehouse.cli import main as warehouse_main
    from warehouse.errors import DatabaseLockedError
    from warehouse.migrate import init_db

    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer))
    real, written = train.writer.commit_round, []

    def locked_for_round_2(url, run, rnd, wait, **kw):
        written.append((run, rnd))
        if rnd.round == 2 and refusal == "locked":
            raise DatabaseLockedError("locked by a reader")
        if rnd.round == 2:
            import duckdb

            raise duckdb.IOException(f'Could not write file "{db}.wal": No space left on device')
        return real(url, run, rnd, wait, **kw)

    monkeypatch.setattr(train.writer, "commit_round", locked_for_round_2)
    monkeypatch.chdir(tmp_path)  # the default spool, ./spool_<run>, lands here
    db = db_url.removeprefix("duckdb:///")
    db = db_url.removeprefix("duckdb:///")
    result = CliRunner().invoke(train_main, ["run", "--model", str(model_dir), "--rounds", "3", "--tasks", TASK,
                                             "--db", db, "--set", "siblings_per_expansion=2", "--run-id", "r_spool",
                                             # the canned logprobs are made up: the mismatch limits are lifted
                                             "--set", "mismatch_max=1e9", "--set", "mismatch_share_gt1_max=1"])
    assert result.exit_code == 3, result.output
    last = result.output.strip().splitlines()[-1]
    spool = tmp_path / "spool_r_spool"
    command = f"warehouse --db {db_url} ingest {spool} --manifest {spool / 'manifest.toml'}"
    assert last == f"Error: run r_spool: round(s) 2 are not in the warehouse but spooled to {spool}. " \
                   f"Load them with: {command}"
    assert "See: warehouse" not in result.output
    assert _rows(db_url, "SELECT DISTINCT round FROM nodes ORDER BY 1") == [(1,), (3,)]

    loaded = CliRunner().invoke(warehouse_main, shlex.split(command)[1:])
    assert loaded.exit_code == 0, loaded.output
    reference = f"duckdb:///{tmp_path / 'reference.duckdb'}"  # every round committed as it was made
    init_db(reference)
    for run, rnd in written:
        real(reference, run, rnd, 5.0)
    got, want = _content(db_url), _content(reference)
    assert {t: len(rows) for t, rows in got.items()} == {t: len(rows) for t, rows in want.items()}
    assert len(got["step_metrics"]) == 3 and len(got["nodes"]) == 6
    assert len(got["node_train_tokens"]) == 6  # the spooled round's training record came back too
    for table in want:
        assert got[table] == want[table], table


def test_a_full_warehouse_disk_spools_the_rounds_and_their_load_command_lands_them(tmp_path):
    """The warehouse on a small tmpfs filled to the last block: each round's commit fails with
    ENOSPC, the round is spooled (on another disk), and the command the warning gives loads
    every row once the warehouse has room."""
    import shlex
    import sys

    from click.testing import CliRunner

    from tests.mounts import require_mounts, run_script
    from warehouse.cli import main
    from warehouse.config import resolve_db_url

    require_mounts()
    disk, spool, stage = tmp_path / "disk", tmp_path / "spool", tmp_path / "stage"
    disk.mkdir()
    url = resolve_db_url(disk / "wh.duckdb")
    code = (f"from tests.train.test_run_writer import _round, _run_row, TASKS\n"
            f"from train.rollout.tree import TaskTree\nfrom train.writer import RoundWriter\n"
            f"said = []\ntrees = {{t: TaskTree(t) for t in TASKS}}\n"
            f"w = RoundWriter({url!r}, _run_row(), spool_root={str(spool)!r}, lock_wait_s=1, log=said.append)\n"
            f"print('WHERE', w.write(_round(trees, 1)), w.write(_round(trees, 2)))\n"
            f"print('SAID', said[0])\nprint('LOAD', w.load_command())\n")
    d, py = shlex.quote(str(disk)), shlex.quote(sys.executable)
    script = f"""set -e
mount -t tmpfs -o size=3600k tmpfs {d}
{py} -m warehouse.cli --db {shlex.quote(url)} init >/dev/null
dd if=/dev/zero of={d}/filler bs=4k 2>/dev/null || true
{py} -c {shlex.quote(code)}
rm {d}/filler
mkdir {shlex.quote(str(stage))} && cp -a {d}/. {shlex.quote(str(stage))}/ && umount {d} && cp -a {shlex.quote(str(stage))}/. {d}/
"""
    done = run_script(script)
    assert "WHERE spool spool" in done.stdout, (done.stdout, done.stderr[-2000:])
    said = next(line for line in done.stdout.splitlines() if line.startswith("SAID "))
    assert "No space left on device" in said or "no space left" in said.lower(), said
    load = next(line for line in done.stdout.splitlines() if line.startswith("LOAD "))[5:]
    assert load in said
    argv = shlex.split(load)
    assert argv[:2] == ["warehouse", "--db"]
    result = CliRunner().invoke(main, argv[1:])
    assert result.exit_code == 0, result.output
    assert _rows(url, "SELECT round, count(*) FROM nodes GROUP BY 1 ORDER BY 1") == [(1, 8), (2, 8)]
    assert _rows(url, "SELECT step FROM steps ORDER BY 1") == [(1,), (2,)]


def test_train_run_with_its_warehouse_on_a_full_disk_spools_the_round_exits_3_and_the_spool_loads(tmp_path, model_dir):
    """`train run` itself (tiny policy, canned completions, one round of two nodes) with the
    warehouse on a 3.5 MB tmpfs that fills to its last block once the run row is in (a real
    ENOSPC, in a mount namespace of its own): the round's nodes go to the spool on another disk,
    the run exits 3 with the spool's load command as its last line, and that command, run once
    the warehouse has room again, lands the round's rows."""
    import shlex
    import sys

    from click.testing import CliRunner

    from tests.mounts import require_mounts, run_script
    from tests.train.test_run import TASK
    from warehouse.cli import main
    from warehouse.config import resolve_db_url

    require_mounts()
    disk, stage = tmp_path / "disk", tmp_path / "stage"
    disk.mkdir()
    url = resolve_db_url(disk / "wh.duckdb")
    argv = ["run", "--model", str(model_dir), "--rounds", "1", "--tasks", TASK, "--db", str(disk / "wh.duckdb"),
            "--run-id", "r_full", "--set", "siblings_per_expansion=2", "--checkpoint-dir", str(tmp_path / "ckpt"),
            "--quiet", "--set", "mismatch_max=1e9", "--set", "mismatch_share_gt1_max=1"]  # canned logprobs
    code = f"""import os, sys
import train.factories, train.writer
from tests.train.test_run import CannedBackend
from train.cli import main
train.factories.make_backend = lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer)
claim = train.writer.RoundWriter.claim
def claim_then_fill(self):  # the run row is in; then the warehouse's disk fills to its last block
    claim(self)
    fd = os.open({str(disk / 'filler')!r}, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, bytes(4096))
    except OSError as exc:
        print("FILLED", exc.strerror, file=sys.stderr, flush=True)
    os.close(fd)
train.writer.RoundWriter.claim = claim_then_fill
main({argv!r})
"""
    d, py, t = shlex.quote(str(disk)), shlex.quote(sys.executable), shlex.quote(str(tmp_path))
    script = f"""mount -t tmpfs -o size=3600k tmpfs {d} || exit 90
{py} -m warehouse.cli --db {shlex.quote(url)} init >/dev/null || exit 91
cd {t} && {py} -c {shlex.quote(code)}
echo "EXIT $?"
rm -f {d}/filler
mkdir {shlex.quote(str(stage))} && cp -a {d}/. {shlex.quote(str(stage))}/ && umount {d} && cp -a {shlex.quote(str(stage))}/. {d}/
"""
    done = run_script(script)
    assert "EXIT 3" in done.stdout, (done.stdout[-2000:], done.stderr[-3000:])
    assert "FILLED No space left on device" in done.stderr
    spool = tmp_path / "spool_r_full"
    command = f"warehouse --db {url} ingest {spool} --manifest {spool / 'manifest.toml'}"
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"Error: run r_full: round(s) 1 are not in the warehouse but spooled to {spool}. " \
                   f"Load them with: {command}", done.stderr[-2000:]
    assert _rows(url, "SELECT run_id FROM runs") == [("r_full",)]  # claimed before the disk filled
    assert _rows(url, "SELECT count(*) FROM nodes") == [(0,)]
    assert len(list((spool / "r_full" / "round_1").glob(f"{TASK}__*.jsonl"))) == 1

    loaded = CliRunner().invoke(main, shlex.split(command)[1:])
    assert loaded.exit_code == 0, loaded.output
    assert _rows(url, "SELECT round, status FROM nodes ORDER BY status") == [(1, "crashed"), (1, "ok")]
    assert _rows(url, "SELECT step FROM steps") == [(1,)]
