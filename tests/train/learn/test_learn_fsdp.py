"""The FSDP (fully_shard) update with 2 processes on CPU (gloo) equals the 1-process update."""
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from learn_helpers import one_thread, random_samples, tiny_policy  # noqa: F401 (autouse)
from train.learn.fsdp import deal, full_adapter_state, shard_policy
from train.learn.loss import LossConfig
from train.learn.packing import pack
from train.learn.step import StepConfig, grpo_step
from train.learn.timing import PhaseTimer

# 8 sequences in several micro-batches over 2 ranks (a filler when their number is odd)
CFG = StepConfig(token_budget=36, max_grad_norm=1e9, loss=LossConfig(kl_coef=0.1))


def _update(sharded: bool) -> tuple[dict, dict, dict]:
    policy = tiny_policy(init=False)
    if sharded:
        shard_policy(policy)
    before = full_adapter_state(policy)
    sgd = torch.optim.SGD([p for p in policy.parameters() if p.requires_grad], lr=1.0)
    metrics = grpo_step(policy, sgd, random_samples(8, seed=3), CFG, PhaseTimer())
    after = full_adapter_state(policy)
    # a round that fits one micro-batch: rank 1 runs only a filler, and must not hang
    one_batch = grpo_step(policy, sgd, random_samples(2, seed=4), StepConfig(token_budget=1000), PhaseTimer())
    return {k: before[k] - after[k] for k in before}, metrics, one_batch  # SGD, lr 1: delta = gradient


def _worker(rank: int, size: int, init_file: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=size)
    try:
        delta, metrics, one_batch = _update(sharded=True)
        if rank == 1:
            torch.save({"delta": delta, "metrics": metrics, "one_batch": one_batch}, out)
    finally:
        dist.destroy_process_group()


def test_two_process_fsdp_update_equals_the_single_process_update(tmp_path):
    out = tmp_path / "rank1.pt"  # rank 1: the one that runs the filler
    mp.spawn(_worker, args=(2, str(tmp_path / "init"), str(out)), nprocs=2, join=True)
    got = torch.load(out, weights_only=False)
    want_delta, want, want_one = _update(sharded=False)
    assert want_delta.keys() == got["delta"].keys()
    for name in want_delta:
        torch.testing.assert_close(got["delta"][name], want_delta[name], rtol=1e-4, atol=1e-6)
    for key in ("loss", "kl", "entropy", "grad_norm", "tokens"):
        assert abs(got["metrics"][key] - want[key]) <= 1e-4 * max(1.0, abs(want[key])), key
        assert abs(got["one_batch"][key] - want_one[key]) <= 1e-4 * max(1.0, abs(want_one[key])), key
    assert got["one_batch"]["micro_batches"] == 1 and got["one_batch"]["ratio_max"] == want_one["ratio_max"]
    n = len(pack([len(s.prompt_ids) + len(s.response_ids) for s in random_samples(8, seed=3)], 36))
    assert n % 2 == 1 and want["micro_batches"] == n and got["metrics"]["micro_batches"] == -(-n // 2)


def test_every_rank_runs_the_same_number_of_micro_batches():
    assert deal(5, 0, 2) == [0, 2, 4]
    assert deal(5, 1, 2) == [1, 3, None]
    assert deal(1, 1, 4) == [None]
