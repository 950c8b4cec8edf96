"""The update on several GPUs: PyTorch FSDP (fully_shard, FSDP2) under torchrun.

Every rank holds a shard of the base and adapter weights; the round's micro-batches are dealt
out across ranks (largest first, round-robin), and every rank runs the same number of
forwards (a rank short of work runs a zero-weight filler) because each sharded forward is a
collective. The loss stays the token mean over the whole round: each rank divides by the
global token count times the world size, and the gradient reduce-scatter averages across
ranks (gloo has no pre-multiplied sum, so we keep FSDP's default average).

The loop around it (train/run.py, train/distributed.py): `train run` under torchrun, or
`train run --nproc N`; every rank generates its share of the round on an unsharded copy
(train/generate/ranks.py) and all ranks run the step.
Checkpoints gather the full adapter and optimizer state to rank 0 (train/learn/checkpoint.py).
CPU tests use the gloo backend with 2 processes (tests/train/learn/test_learn_fsdp.py,
tests/train/test_run_distributed.py).
"""
from __future__ import annotations

import torch
import torch.distributed as dist


def world() -> tuple[int, int]:
    """(rank, world size); (0, 1) when not distributed."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def shard_policy(policy):
    """fully_shard every decoder layer and the decoder (embeddings, final norm), and, when the
    output head has its own weight, the head; returns the policy. The learner calls the
    decoder and the head separately (the head chunk by chunk), so each is its own FSDP unit;
    the head stays gathered between chunks (reshard_after_forward=False).

    Tied input/output embeddings (the tiny policy) are one frozen tensor used both inside the
    decoder and by the head outside it: it stays replicated on every rank (ignored_params),
    so both uses see the same full weight. The adapter lives in the decoder layers only
    (LoRA skips embeddings and the head), so nothing trainable is left unsharded."""
    from torch.distributed.fsdp import fully_shard

    from train.learn.logprobs import causal_lm

    lm = causal_lm(policy)
    head, decoder = lm.get_output_embeddings(), lm.get_decoder()
    tied = head.weight is decoder.get_input_embeddings().weight
    for module in lm.modules():
        if type(module).__name__.endswith("DecoderLayer"):
            fully_shard(module)
    if tied:
        fully_shard(decoder, ignored_params={head.weight})
    else:
        fully_shard(decoder)
        fully_shard(head, reshard_after_forward=False)
    return policy


def deal(n_batches: int, rank: int, size: int) -> list[int | None]:
    """Indices of the micro-batches (sorted largest first) this rank runs; None = a filler.
    Every rank gets the same count."""
    per_rank = -(-n_batches // size)
    mine = list(range(rank, n_batches, size))
    return mine + [None] * (per_rank - len(mine))


def collective_device() -> torch.device:
    """Where a tensor for a collective must live: NCCL reduces only CUDA tensors (a CPU one
    fails with 'No backend type associated with device type cpu'), gloo CPU ones."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def gather_objects(mine: dict) -> dict:
    """Every rank's dict merged (picklable values), on every rank."""
    if world()[1] == 1:
        return mine
    parts = [None] * world()[1]
    dist.all_gather_object(parts, mine)
    return {k: v for part in parts for k, v in part.items()}


def all_reduce_sum(values: dict) -> dict:
    """Sum float metrics across ranks (max for ratio_max)."""
    if world()[1] == 1:
        return values
    keys = sorted(k for k in values if k != "ratio_max")
    device = collective_device()
    t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    out = dict(zip(keys, t.tolist()))
    if "ratio_max" in values:
        m = torch.tensor([float(values["ratio_max"])], dtype=torch.float64, device=device)
        dist.all_reduce(m, op=dist.ReduceOp.MAX)
        out["ratio_max"] = float(m)
    return out


@torch.no_grad()
def full_adapter_state(policy) -> dict:
    """The unsharded adapter weights, copies detached from the parameters (every rank must
    call it). On one rank `full_tensor()` returns a view of the parameter itself, which the
    next optimizer step would overwrite: hence the clone."""
    out = {}
    for name, p in policy.named_parameters():
        if p.requires_grad:
            out[name] = (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().clone()
    return out
