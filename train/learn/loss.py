"""The per-token GRPO objective: clipped importance-ratio policy loss plus KL to the reference.

Every function returns SUMS over tokens; the caller divides by the round's total response
tokens, so the loss is a token mean however the tokens were split into micro-batches.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LossConfig:
    clip_eps: float = 0.2
    kl_coef: float = 0.001


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token KL(policy || ref) estimate, k3: exp(ref - logp) - (ref - logp) - 1 >= 0."""
    delta = (ref_logp - logp).clamp(-20.0, 20.0)
    return torch.exp(delta) - delta - 1.0


def token_loss_sums(logp, old_logp, ref_logp, advantages, cfg: LossConfig) -> dict:
    """All inputs (n,) fp32; advantages already broadcast per token. Sums, not means."""
    ratio = torch.exp(logp - old_logp)
    clipped = ratio.clamp(1.0 - cfg.clip_eps, 1.0 + cfg.clip_eps)
    pg = -torch.minimum(ratio * advantages, clipped * advantages)  # (n,)
    kl = k3_kl(logp, ref_logp)
    was_clipped = (ratio * advantages) > (clipped * advantages)
    return {
        "loss": (pg + cfg.kl_coef * kl).sum(),
        "pg_loss": pg.detach().sum(),
        "kl": kl.detach().sum(),
        "clip_frac": was_clipped.float().sum(),
        "ratio_max": ratio.detach().max() if ratio.numel() else ratio.new_tensor(1.0),
    }
