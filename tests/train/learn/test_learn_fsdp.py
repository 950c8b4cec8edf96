"""The FSDP (fully_shard) update with 2 processes on CPU (gloo) equals the 1-process update, for
untied and tied (the tiny policy's) embeddings; checkpoints move between world sizes.

One spawn of 2 ranks per module (process start-up is most of the cost on 2 cores); the
tests below read what the ranks saved."""
import os
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from learn_helpers import one_thread, optimizer_for, random_samples, tiny_base, tiny_policy  # noqa: F401
from train.learn.checkpoint import ResumePoint, is_sharded, load_checkpoint, save_checkpoint
from train.learn.fsdp import deal, full_adapter_state, shard_policy
from train.learn.lora import prepare_for_training
from train.policy.lora import add_lora
from train.learn.loss import LossConfig
from train.learn.packing import pack
from train.learn.step import StepConfig, grpo_step
from train.learn.timing import PhaseTimer

# 8 sequences in several micro-batches over 2 ranks (a filler when their number is odd)
CFG = StepConfig(token_budget=36, max_grad_norm=1e9, loss=LossConfig(kl_coef=0.1))
ADAM_CFG = StepConfig(token_budget=48)


def _policy(tied: bool, init=True):
    if not tied:
        return tiny_policy(init=init)
    base = tiny_base(0)
    base.config.tie_word_embeddings = True
    base.lm_head.weight = base.model.embed_tokens.weight  # the tiny policy's layout
    return prepare_for_training(add_lora(base, rank=32, alpha=32, init=init))


def _update(sharded: bool, tied: bool) -> tuple[dict, dict, dict]:
    policy = _policy(tied, init=False)
    if sharded:
        shard_policy(policy)
    before = full_adapter_state(policy)
    sgd = torch.optim.SGD([p for p in policy.parameters() if p.requires_grad], lr=1.0)
    metrics = grpo_step(policy, sgd, random_samples(8, seed=3), CFG, PhaseTimer())
    after = full_adapter_state(policy)
    # a round that fits one micro-batch: rank 1 runs only a filler, and must not hang
    one_batch = grpo_step(policy, sgd, random_samples(2, seed=4), StepConfig(token_budget=1000), PhaseTimer())
    return {k: before[k] - after[k] for k in before}, metrics, one_batch  # SGD, lr 1: delta = gradient


def _adam_step(policy, optimizer, step: int) -> None:
    grpo_step(policy, optimizer, random_samples(6, seed=10 + step), ADAM_CFG, PhaseTimer())


def _resume_then_step(root, point: ResumePoint, shard: bool) -> dict:
    """A fresh tied policy (sharded or not) resumed from `point`, after one more step."""
    policy = _policy(tied=True)
    if shard:
        shard_policy(policy)
    optimizer = optimizer_for(policy)
    load_checkpoint(root, point, policy, optimizer)
    _adam_step(policy, optimizer, point.step + 1)
    return full_adapter_state(policy)


def _checkpoints(root) -> dict:
    """2 ranks: save step 1, take step 2; resume the 1-process checkpoint and take its step 2."""
    policy = shard_policy(_policy(tied=True))
    optimizer = optimizer_for(policy)
    _adam_step(policy, optimizer, 1)
    save_checkpoint(root, "two_ranks", 1, policy, optimizer)
    _adam_step(policy, optimizer, 2)
    return {"two_ranks_step2": full_adapter_state(policy), "sharded": is_sharded(policy),
            "from_one_rank_step2": _resume_then_step(root, ResumePoint("one_rank", 1), shard=True)}


def _worker(rank: int, size: int, init_file: str, root: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=size)
    try:
        got = {tied: _update(sharded=True, tied=tied) for tied in (False, True)}
        got["ckpt"] = _checkpoints(root)
        if rank == 1:  # the rank that runs the filler
            torch.save(got, out)
        del got
        dist.barrier()  # no rank tears gloo down while the other still has a collective in flight
    finally:
        dist.destroy_process_group()
    # Leave without interpreter finalization. A rank aborted now and then at exit ("terminate
    # called without an active exception", SIGABRT; one full-suite run in two on a fresh clone):
    # C++ objects of the process group (gloo work holding tensors) destroyed while the
    # interpreter shuts down, as pytorch/pytorch#179291 describes. The results are on disk and
    # every collective is over (the barrier), so nothing needs that teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """What the 2 ranks computed, plus the 1-process checkpoint they resumed from."""
    tmp = tmp_path_factory.mktemp("fsdp")
    torch.set_num_threads(1)
    policy = _policy(tied=True)
    optimizer = optimizer_for(policy)
    _adam_step(policy, optimizer, 1)
    save_checkpoint(tmp, "one_rank", 1, policy, optimizer)
    _adam_step(policy, optimizer, 2)
    one_rank_step2 = full_adapter_state(policy)
    mp.spawn(_worker, args=(2, str(tmp / "init"), str(tmp), str(tmp / "rank1.pt")), nprocs=2, join=True)
    return {**torch.load(tmp / "rank1.pt", weights_only=False), "root": tmp, "one_rank_step2": one_rank_step2}


def _assert_same_adapter(got: dict, want: dict, **tol) -> None:
    assert got.keys() == want.keys() and len(want) > 0
    for name in want:
        torch.testing.assert_close(got[name], want[name], **tol)


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_two_process_fsdp_update_equals_the_single_process_update(two_ranks, tied):
    got_delta, got, got_one = two_ranks[tied]
    want_delta, want, want_one = _update(sharded=False, tied=tied)
    _assert_same_adapter(got_delta, want_delta, rtol=1e-4, atol=1e-6)
    assert any(float(d.abs().max()) > 1e-3 for d in want_delta.values())  # a real gradient was compared
    for key in ("loss", "kl", "entropy", "grad_norm", "tokens"):
        assert abs(got[key] - want[key]) <= 1e-4 * max(1.0, abs(want[key])), key
        assert abs(got_one[key] - want_one[key]) <= 1e-4 * max(1.0, abs(want_one[key])), key
    assert got_one["micro_batches"] == 1 and got_one["ratio_max"] == want_one["ratio_max"]
    n = len(pack([len(s.prompt_ids) + len(s.response_ids) for s in random_samples(8, seed=3)], 36))
    # the round's micro-batches, all ranks together (rank 0 ran -(-n // 2) of them)
    assert n % 2 == 1 and want["micro_batches"] == n and got["micro_batches"] == n


def test_a_two_rank_checkpoint_resumes_in_one_process_to_the_same_next_step(two_ranks):
    ckpt = two_ranks["ckpt"]
    assert ckpt["sharded"]
    got = _resume_then_step(two_ranks["root"], ResumePoint("two_ranks", 1), shard=False)
    _assert_same_adapter(got, ckpt["two_ranks_step2"], rtol=1e-4, atol=1e-5)


def test_a_one_process_checkpoint_resumes_on_two_ranks_to_the_same_next_step(two_ranks):
    _assert_same_adapter(two_ranks["ckpt"]["from_one_rank_step2"], two_ranks["one_rank_step2"],
                         rtol=1e-4, atol=1e-5)


def test_the_two_rank_checkpoint_has_the_single_process_layout(two_ranks):
    one, two = (two_ranks["root"] / run / "global_step_1" for run in ("one_rank", "two_ranks"))
    assert sorted(p.name for p in one.iterdir()) == sorted(p.name for p in two.iterdir())
    from safetensors.torch import load_file

    a, b = (load_file(str(d / "adapter" / "adapter_model.safetensors")) for d in (one, two))
    assert a.keys() == b.keys() and all(a[k].shape == b[k].shape for k in a)
    opt_a, opt_b = (torch.load(d / "optimizer.pt", weights_only=False) for d in (one, two))
    assert sorted(opt_a["state"]) == sorted(opt_b["state"]) == list(range(len(a)))  # index-keyed, as torch.optim
    assert opt_a["param_groups"][0]["params"] == opt_b["param_groups"][0]["params"]


def test_every_rank_runs_the_same_number_of_micro_batches():
    assert deal(5, 0, 2) == [0, 2, 4]
    assert deal(5, 1, 2) == [1, 3, None]
    assert deal(1, 1, 4) == [None]
