"""`train run` under several ranks (CPU, gloo): `--nproc 2`, every rank generating its share of
each call, writes the nodes one rank writes, node by node; a failure of rank 0 alone stops
every rank instead of leaving them waiting in a collective."""
from __future__ import annotations

import multiprocessing
import os
import sys

import pytest
from click.testing import CliRunner

from tests.train.test_run import TASK, model_dir, tiny_model, tiny_tokenizer  # noqa: F401 - shared fixtures
from train.distributed import INTERRUPTED, Stop, Team, exit_status
from warehouse.errors import TerminalError

# one task, one expansion of 2 siblings, short responses: the random tiny Llama (tied
# embeddings, like the tiny policy) writes no code, so nothing executes and every node fails
SMALL = ["--tasks", TASK, "--set", "siblings_per_expansion=2", "--set", "expansions_per_round=1",
         "--set", "response_cap=24", "--exec-workers", "1"]


def _train(model, db_url: str, ckpt, run_id: str, *extra: str):
    from train.cli import main

    args = ["run", "--model", str(model), "--rounds", "2", "--db", db_url.removeprefix("duckdb:///"),
            "--checkpoint-dir", str(ckpt), "--run-id", run_id, *SMALL, *extra]
    return CliRunner().invoke(main, args)


def _counts(db_url: str, run_id: str) -> dict:
    from warehouse.db import connect

    with connect(db_url, read_only=True) as con:
        one = lambda sql: con.execute(sql, [run_id]).fetchall()  # noqa: E731
        return {"nodes": one('SELECT "round", count(*) FROM "nodes" WHERE "run_id" = ? GROUP BY 1 ORDER BY 1'),
                "steps": one('SELECT "step" FROM "steps" WHERE "run_id" = ? ORDER BY 1'),
                "step_metrics": one('SELECT "step", "tokens", "micro_batches" FROM "step_metrics" '
                                    'WHERE "run_id" = ? ORDER BY 1'),
                "runs": one('SELECT count(*) FROM "runs" WHERE "run_id" = ?'),
                # every node trained, its per-token record gathered from whichever rank's micro-batch held it
                "trained": one('SELECT n."round", count(*), sum(len(t."trainer_logprobs")), sum(n."n_response_tokens"), '
                               'list(DISTINCT n."policy_version") FROM "node_train_tokens" t '
                               'JOIN "nodes" n USING ("source_id", "line_no") WHERE n."run_id" = ? GROUP BY 1 ORDER BY 1')}


NODE_ROWS_SQL = """SELECT n."round", n."task", n."node_id", n."parent_id", n."mode", n."status", p."code",
       p."response_token_ids", p."response_logprobs"
FROM "nodes" n JOIN "node_payloads" p USING ("source_id", "line_no")
WHERE n."run_id" = ?
ORDER BY n."round", n."task", n."step", n."line_no"
"""


def _node_rows(db_url: str, run_id: str) -> list[tuple]:
    from warehouse.db import connect

    with connect(db_url, read_only=True) as con:
        return con.execute(NODE_ROWS_SQL, [run_id]).fetchall()


def _in_every_rank(monkeypatch, setup) -> None:
    """`train run --nproc` calls `setup` in each rank first: the ranks are fresh processes, so a
    patch made here is not seen there."""
    import functools

    import train.launch

    monkeypatch.setattr(train.launch, "launch", functools.partial(train.launch.launch, rank_setup=setup))


def _spread(graded):
    """The random model's siblings all fail alike: no advantage, no update. The learner sees
    rewards 0, 1, 0, 1, ... instead, so step 1 moves the adapter and round 2 samples from the
    weights each rank's generation copy got."""
    import dataclasses

    return lambda result: [dataclasses.replace(s, reward=float(i % 2)) for i, s in enumerate(graded(result))]


def spread_rewards() -> None:
    import train.run

    train.run.round_samples = _spread(train.run.round_samples)


def slow_end() -> None:
    """Rank 0 takes 1.5 s to record how its run ended, as on a slow disk."""
    import time

    from train.run_state import RunLife

    end = RunLife.end
    RunLife.end = lambda self, exc=None: (self.db_url and time.sleep(1.5), end(self, exc))[1]


# two tasks (one sibling group each per call, so each rank generates one), two expansion
# indices per round (the second may pick a parent the first made), a large learning rate so
# round 2's tokens show the update
RMSE = "mini-regression-rmse"
DEALT = ["--tasks", f"{TASK},{RMSE}", "--set", "expansions_per_round=2", "--set", "learning_rate=0.05"]


@pytest.mark.timeout(150)
def test_two_ranks_generate_the_round_one_process_generates_node_by_node(db_url, model_dir, tmp_path, monkeypatch,
                                                                         capfd):
    import train.run

    monkeypatch.setattr(train.run, "round_samples", _spread(train.run.round_samples))  # the one-process run
    _in_every_rank(monkeypatch, spread_rewards)
    two = _train(model_dir, db_url, tmp_path / "ckpt", "two", "--no-health-gate", "--nproc", "2", *DEALT)
    ranks = capfd.readouterr()
    assert two.exit_code == 0, two.output + ranks.err
    assert "Done: run two, 2 round(s)." in two.output
    # each call's two sibling groups: one generated on rank 0, one on rank 1
    assert ranks.out.count("generation dealt over 2 ranks: 2, 2 rows") == 4, ranks.out
    one = _train(model_dir, db_url, tmp_path / "ckpt", "one", "--no-health-gate", *DEALT)
    assert one.exit_code == 0, one.output
    want, got = _node_rows(db_url, "one"), _node_rows(db_url, "two")
    assert [row[:2] for row in want] == [(r, t) for r in (1, 2) for t in sorted((TASK, RMSE)) for _ in range(4)]
    assert [row[:-1] for row in got] == [row[:-1] for row in want]  # ids, parents, modes, status, code, token ids
    for g, w in zip(got, want):
        assert g[-1] == pytest.approx(w[-1], abs=1e-4)  # logprobs
    rounds = {r: {tuple(row[-2]) for row in want if row[0] == r} for r in (1, 2)}
    assert all(len(tokens) == 8 for tokens in rounds.values())  # siblings differ: a real sample
    want_counts, got_counts = _counts(db_url, "one"), _counts(db_url, "two")
    assert got_counts == want_counts
    assert want_counts["steps"] == [(1,), (2,)] and want_counts["runs"] == [(1,)]
    assert [(r, n, versions) for r, n, _, _, versions in want_counts["trained"]] == [(1, 8, [0]), (2, 8, [1])]
    assert all(tokens == lengths for _, _, tokens, lengths, _ in want_counts["trained"])
    for run_id in ("one", "two"):
        steps = sorted(p.name for p in (tmp_path / "ckpt" / run_id).glob("global_step_*"))
        assert steps == ["global_step_1", "global_step_2"], run_id
        assert (tmp_path / "ckpt" / run_id / "global_step_2" / "adapter" / "adapter_model.safetensors").is_file()


@pytest.mark.timeout(120)
def test_a_rank_0_failure_stops_every_rank(db_url, model_dir, tmp_path, capfd):
    # the health gate fails after step 1 on rank 0 only; rank 1 waits for round 2's samples
    result = _train(model_dir, db_url, tmp_path / "ckpt", "gate", "--nproc", "2")
    ranks = capfd.readouterr()
    assert result.exit_code == 1
    assert "ranks failed (exit status by rank: {0: 1" in result.output and result.output.startswith("Error: ")
    assert "health gate failed after step 1 of run gate" in ranks.err
    assert "Rank 1: rank 0 stopped the run (exit 1); stopping too." in ranks.err
    assert _counts(db_url, "gate")["nodes"] == [(1, 2)]


def test_rank_0_is_reported_and_records_its_end_when_it_leaves_last(db_url, model_dir, tmp_path, monkeypatch):
    # rank 0 takes a while after its STOP (here 1.5 s recording the run's end, as a slow disk
    # would); the launcher ends the run at the first rank it sees exit non-zero and kills the
    # rest, so rank 1 must not leave first: it was reported instead of rank 0, and rank 0 was
    # killed before its end was recorded
    _in_every_rank(monkeypatch, slow_end)
    result = _train(model_dir, db_url, tmp_path / "ckpt", "slow_end", "--nproc", "2")
    assert result.exit_code == 1
    assert "ranks failed (exit status by rank: {0: 1" in result.output, result.output
    from warehouse.db import connect

    with connect(db_url, read_only=True) as con:
        assert con.execute("SELECT state FROM run_state WHERE run_id = 'slow_end'").fetchall() == [("failed",)]


def _team_member(rank: int, init_file: str, failure: BaseException | None) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    team = Team(rank=rank, size=2)
    try:
        assert team.share("round 1 samples" if team.main else None) == "round 1 samples"
        if team.main:
            with team.alone():
                if failure is not None:
                    raise failure
        team.finish()
        status = 0
    except BaseException as exc:  # noqa: BLE001 - the status is what the test reads
        status = exit_status(exc)
    dist.destroy_process_group()
    os._exit(status)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("failure, status", [(None, 0), (KeyboardInterrupt(), INTERRUPTED),
                                             (TerminalError("gate"), 1)], ids=["done", "ctrl-c", "error"])
def test_every_rank_leaves_with_rank_0s_exit_status(tmp_path, failure, status):
    # fresh processes, not forks of pytest's (whose OpenMP threads a fork breaks)
    spawn = multiprocessing.get_context("spawn")
    members = [spawn.Process(target=_team_member, args=(rank, str(tmp_path / "init"), failure)) for rank in (0, 1)]
    for member in members:
        member.start()
    for member in members:
        member.join(50)
    hung = [m for m in members if m.is_alive()]
    for member in hung:
        member.kill()
    assert not hung and [m.exitcode for m in members] == [status, status]


def test_one_rank_team_passes_messages_through_without_torch_distributed():
    team = Team()
    assert team.main and team.share([1, 2]) == [1, 2]
    with pytest.raises(ValueError), team.alone():  # nobody to tell: the error just propagates
        raise ValueError("rank 0 alone")
    team.finish()
    assert [exit_status(e) for e in (SystemExit(3), KeyboardInterrupt(), TerminalError("x"), RuntimeError())] \
        == [3, INTERRUPTED, 1, 1]
    assert Stop(INTERRUPTED) == Stop(130)


def test_vllm_with_several_ranks_is_refused_before_any_work_and_auto_takes_hf():
    from train.generate.choice import choose_backend

    assert choose_backend("vllm", "cpu", 1).name == "vllm"  # one rank: allowed
    assert choose_backend("hf", "cpu", 2).name == "hf"
    with pytest.raises(TerminalError, match="--backend vllm with 2 ranks.*--backend hf"):
        choose_backend("vllm", "cuda", 2)
    assert choose_backend("auto", "cuda", 2).name == "hf"  # vLLM cannot take a torchrun world


def test_nproc_below_one_is_a_usage_error(db_url, model_dir, tmp_path):
    result = _train(model_dir, db_url, tmp_path / "ckpt", "bad", "--nproc", "0")
    assert result.exit_code == 2 and "--nproc" in result.output


def test_a_rank_that_fails_on_a_bug_prints_its_traceback(monkeypatch, capfd):
    # torch's launcher logs are quieted: without this, a rank other than 0 failed in silence
    from train import launch

    def boom(opts, log):
        raise RuntimeError("No backend type associated with device type cpu")

    monkeypatch.setattr("train.run.run", boom)
    monkeypatch.setenv("RANK", "1")
    for name in ("stdout", "stderr"):  # _rank_main rebinds them; put pytest's back afterwards
        monkeypatch.setattr(sys, name, getattr(sys, name))
    with pytest.raises(RuntimeError):
        launch._rank_main(object())
    err = capfd.readouterr().err
    assert err.startswith("Rank 1 failed:\nTraceback (most recent call last):")
    assert "RuntimeError: No backend type associated with device type cpu" in err


def test_collectives_use_the_backends_device(monkeypatch):
    # NCCL reduces CUDA tensors only: the metrics' all-reduce failed on two GPUs with a CPU tensor
    import torch

    from train.learn import fsdp

    monkeypatch.setattr(fsdp.dist, "get_backend", lambda group=None: "nccl")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert fsdp.collective_device() == torch.device("cuda", 1)
    monkeypatch.setattr(fsdp.dist, "get_backend", lambda group=None: "gloo")
    assert fsdp.collective_device() == torch.device("cpu")
