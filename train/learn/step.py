"""One GRPO step on a round's nodes: old_log_prob, ref, adv, update_actor.

`gen`, `update_weights` and `save_checkpoint` belong to the loop (train/run.py) and use the
same PhaseTimer. The sequences are packed once, so the old log-probs, the reference log-probs
and the update see identical micro-batches: at the first step the ratio is exactly one.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from train.learn.advantages import grpo_valid_only
from train.learn.packed_attention import packed_attention
from train.learn.fsdp import all_reduce_sum, deal, gather_objects, world
from train.learn.logprobs import PackedRow, causal_lm, pack_row, row_logprobs
from train.learn.lora import compiled_norms, mixed_precision
from train.learn.loss import LossConfig, token_loss_sums
from train.learn.packing import pack
from train.learn.timing import PhaseTimer


@dataclass(frozen=True)
class Sample:
    """One node as the learner sees it."""

    prompt_ids: Sequence[int]
    response_ids: Sequence[int]
    reward: float | None
    sibling_group: str


@dataclass(frozen=True)
class StepConfig:
    token_budget: int = 36864  # per micro-batch, hard cap; must cover the arm's total cap
    logprob_chunk: int = 2048  # tokens per output-head chunk
    max_grad_norm: float = 1.0
    epochs: int = 1  # optimizer steps over the round's batch (PPO epochs; the ratio moves after the first)
    compile_norms: bool = False  # RMSNorms compiled during update_actor (train.learn.variant chooses)
    loss: LossConfig = field(default_factory=LossConfig)


@dataclass(frozen=True)
class TokenRecord:
    """What the step computed for one sample's response tokens (node_train_tokens), each list
    aligned with its response_ids."""

    trainer_logprobs: list[float]  # old_log_prob: the learner's, before the update
    ref_logprobs: list[float]  # the reference's (adapter disabled)
    ratios: list[float]  # exp(logprob - old_log_prob) in the last epoch's loss
    advantage: float


@dataclass
class _Batch:
    rows: list[PackedRow]
    members: list[list[int]]  # per row, the sample index of each packed sequence (filler: none)
    advantages: list[torch.Tensor]  # per row, (n,) one value per loss token
    weights: list[float]  # 1.0, or 0.0 for a filler row (FSDP: equal forwards on every rank)
    tokens: int  # response tokens of the whole round, all ranks together
    micro_batches: int  # of the whole round, all ranks together (fillers not counted)


def _build_batch(samples: Sequence[Sample], advantages: Sequence[float], budget: int) -> _Batch:
    keep = [i for i, s in enumerate(samples) if len(s.response_ids) > 0]
    lengths = [len(samples[i].prompt_ids) + len(samples[i].response_ids) for i in keep]
    batches = sorted(pack(lengths, budget), key=lambda mb: -mb.tokens)
    rank, size = world()
    rows, members, advs, weights = [], [], [], []
    for index in deal(len(batches), rank, size):
        if index is None:  # filler: one token predicting one token, zero weight
            rows.append(pack_row([([0], [0])]))
            members.append([])
            advs.append(torch.zeros(1))
            weights.append(0.0)
            continue
        mb = batches[index]
        chosen = [samples[keep[j]] for j in mb.indices]
        members.append([keep[j] for j in mb.indices])
        rows.append(pack_row([(s.prompt_ids, s.response_ids) for s in chosen]))
        advs.append(torch.cat([
            torch.full((len(s.response_ids),), float(advantages[keep[j]]))
            for j, s in zip(mb.indices, chosen)
        ]))
        weights.append(1.0)
    return _Batch(rows, members, advs, weights, sum(len(samples[i].response_ids) for i in keep), len(batches))


@torch.no_grad()
def _logprobs(policy, rows: list[PackedRow], chunk: int) -> list[torch.Tensor]:
    policy.eval()
    with mixed_precision(policy):
        return [row_logprobs(policy, row, chunk)[0] for row in rows]


def _accumulate(sums: dict, terms: dict) -> None:
    for key, value in terms.items():
        value = float(value.detach())
        sums[key] = max(sums[key], value) if key == "ratio_max" else sums[key] + value


def _update(policy, optimizer, batch: _Batch, old, ref, cfg: StepConfig) -> tuple[dict, list[torch.Tensor]]:
    """The update's metrics, and per row the ratio (n,) each loss token had."""
    policy.train()
    optimizer.zero_grad(set_to_none=True)
    # every key present on every rank, even one that only ran fillers: metrics are all-reduced
    sums = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "ratio_max": 0.0}
    entropy, ratios = 0.0, []
    # backward recomputes checkpointed layers: the packed attention must still be in force
    with packed_attention(causal_lm(policy)), mixed_precision(policy), compiled_norms(policy, cfg.compile_norms):
        for row, adv, weight, old_lp, ref_lp in zip(batch.rows, batch.advantages, batch.weights, old, ref):
            logp, ent = row_logprobs(policy, row, cfg.logprob_chunk)
            terms = token_loss_sums(logp, old_lp, ref_lp, adv.to(logp.device), cfg.loss)
            ratios.append(torch.exp(logp.detach() - old_lp).cpu())  # as token_loss_sums forms it
            # FSDP averages gradients over ranks: scale by their number to keep the token mean
            (terms["loss"] * (weight * world()[1] / batch.tokens)).backward()
            if weight:
                _accumulate(sums, terms)
                entropy += float(ent.sum())
    grad_norm = _clip(policy, cfg.max_grad_norm)
    optimizer.step()
    sums = all_reduce_sum({**sums, "entropy": entropy})
    means = {k: v / batch.tokens for k, v in sums.items() if k != "ratio_max"}
    return {**means, "ratio_max": sums["ratio_max"], "grad_norm": grad_norm}, ratios


def _token_records(batch: _Batch, old, ref, ratios, advantages: Sequence[float]) -> dict[int, TokenRecord]:
    """Sample index -> its TokenRecord, gathered from every rank's micro-batches."""
    mine = {}
    for row, members, old_lp, ref_lp, ratio in zip(batch.rows, batch.members, old, ref, ratios):
        old_lp, ref_lp = old_lp.float().cpu(), ref_lp.float().cpu()
        for index, span in zip(members, row.response_slices):
            mine[index] = TokenRecord(old_lp[span].tolist(), ref_lp[span].tolist(), ratio[span].tolist(),
                                      float(advantages[index]))
    return gather_objects(mine)


def _clip(policy, max_norm: float) -> float:
    params = [p for p in policy.parameters() if p.requires_grad]
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)


def grpo_step(policy, optimizer, samples: Sequence[Sample], cfg: StepConfig,
              timer: PhaseTimer, tokens: list | None = None) -> dict:
    """Update `policy` (a peft model) on one round's samples; returns the step's metrics (those
    of the last epoch when `cfg.epochs` > 1). `tokens`, when given, is filled with one
    TokenRecord per sample (None for a sample without response tokens), on every rank."""
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    with timer.phase("adv"):
        advantages = grpo_valid_only([s.reward for s in samples], [s.sibling_group for s in samples])
    batch = _build_batch(samples, advantages, cfg.token_budget)
    if batch.tokens == 0:
        if tokens is not None:
            tokens[:] = [None] * len(samples)
        return {"tokens": 0, "micro_batches": 0, "skipped": "no response tokens"}
    with timer.phase("old_log_prob"):
        old = _logprobs(policy, batch.rows, cfg.logprob_chunk)
    with timer.phase("ref"), policy.disable_adapter():
        ref = _logprobs(policy, batch.rows, cfg.logprob_chunk)
    with timer.phase("update_actor"):
        for _ in range(max(cfg.epochs, 1)):  # old and ref stay those of the sampling policy
            metrics, ratios = _update(policy, optimizer, batch, old, ref, cfg)
    if tokens is not None:
        records = _token_records(batch, old, ref, ratios, advantages)
        tokens[:] = [records.get(i) for i in range(len(samples))]
    policy.eval()  # generation runs next: no checkpointing, KV cache on
    peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None
    return {**metrics, "tokens": batch.tokens, "micro_batches": batch.micro_batches,
            "largest_micro_batch": max(row.input_ids.shape[1] for row in batch.rows),  # this rank's
            "peak_mem_gib": peak, "lr": optimizer.param_groups[0]["lr"], "epochs": max(cfg.epochs, 1),
            "nonzero_advantages": sum(1 for a in advantages if a != 0.0)}
