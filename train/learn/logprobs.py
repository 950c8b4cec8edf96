"""Per-token log-probabilities of chosen tokens, chunked over tokens.

The full [tokens, vocab] logits are never materialized in fp32 (for a 152k vocabulary and
36864 tokens that alone is 22 GiB, and as much again for its gradient). We run the decoder
once to get hidden states, then the output head chunk by chunk; with gradients on, each chunk
sits under activation checkpointing, so backward recomputes one chunk's logits at a time.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint

from train.learn.packed_attention import boundaries, packed_attention, position_ids


@dataclass(frozen=True)
class PackedRow:
    """One micro-batch as one row: input ids, and which positions predict response tokens."""

    input_ids: torch.Tensor  # (1, T)
    lengths: tuple[int, ...]  # tokens per packed sequence
    pred_index: torch.Tensor  # (n,) positions whose next token is a response token
    targets: torch.Tensor  # (n,) those response tokens
    response_slices: tuple[slice, ...]  # per sequence, its span of the n loss tokens


def pack_row(sequences: Sequence[tuple[Sequence[int], Sequence[int]]]) -> PackedRow:
    """Concatenate (prompt_ids, response_ids) pairs; every prompt must be non-empty."""
    ids, pred, slices, lengths, start, n = [], [], [], [], 0, 0
    for prompt, response in sequences:
        if not prompt:
            raise ValueError("a sequence needs at least one prompt token to predict its response from")
        ids.extend(prompt)
        ids.extend(response)
        pred.extend(range(start + len(prompt) - 1, start + len(prompt) + len(response) - 1))
        slices.append(slice(n, n + len(response)))
        lengths.append(len(prompt) + len(response))
        start += lengths[-1]
        n += len(response)
    targets = [ids[i + 1] for i in pred]
    return PackedRow(torch.tensor([ids]), tuple(lengths), torch.tensor(pred, dtype=torch.long),
                     torch.tensor(targets, dtype=torch.long), tuple(slices))


def _head_logprobs(head, hidden: torch.Tensor, targets: torch.Tensor):
    # hidden (c, H) -> logprob (c,), entropy (c,); the (c, V) logits live only here
    logits = head(hidden).float()
    lse = torch.logsumexp(logits, dim=-1)
    chosen = logits.gather(-1, targets[:, None]).squeeze(-1) - lse
    with torch.no_grad():
        entropy = lse - (torch.softmax(logits, dim=-1) * logits).sum(-1)
    return chosen, entropy


def chunked_logprobs(head, hidden: torch.Tensor, targets: torch.Tensor, chunk: int = 2048):
    """hidden (n, H), targets (n,) -> logprob (n,) fp32 with grad, entropy (n,) without."""
    logps, ents = [], []
    for a in range(0, hidden.shape[0], chunk):
        h, t = hidden[a:a + chunk], targets[a:a + chunk]
        if torch.is_grad_enabled():
            lp, ent = checkpoint(_head_logprobs, head, h, t, use_reentrant=False)
        else:
            lp, ent = _head_logprobs(head, h, t)
        logps.append(lp)
        ents.append(ent.detach())
    return torch.cat(logps), torch.cat(ents)


def causal_lm(policy):
    """The transformers causal LM under a (possibly peft-wrapped) policy."""
    return policy.get_base_model() if hasattr(policy, "get_base_model") else policy


def row_logprobs(policy, row: PackedRow, chunk: int = 2048):
    """Log-probs (n,) and entropies (n,) of a packed row's response tokens under `policy`.

    With gradient checkpointing, call backward inside `packed_attention(causal_lm(policy))`
    too: the recompute must see the same attention as the forward.
    """
    lm = causal_lm(policy)
    device = lm.get_output_embeddings().weight.device
    bounds = boundaries(row.lengths)
    if _linear_attention(lm):  # its kernels (flash-linear-attention) read the boundaries on the device
        bounds = bounds.to(device)
    with packed_attention(lm):
        out = lm.get_decoder()(
            input_ids=row.input_ids.to(device), position_ids=position_ids(row.lengths, device),
            cu_seq_lens_q=bounds, use_cache=False,
        )
        hidden = out.last_hidden_state[0, row.pred_index.to(device)]  # (n, H)
        return chunked_logprobs(lm.get_output_embeddings(), hidden, row.targets.to(device), chunk)


def _linear_attention(lm) -> bool:
    """A hybrid model (Qwen3.5): some layers are linear attention."""
    config = getattr(lm.config, "text_config", None) or lm.config
    return "linear_attention" in (getattr(config, "layer_types", None) or ())


def plain_logprobs(policy, prompt: Sequence[int], response: Sequence[int]) -> torch.Tensor:
    """Reference implementation: full logits, one sequence, fp32 log_softmax (tests only)."""
    lm = causal_lm(policy)
    ids = torch.tensor([list(prompt) + list(response)], device=lm.device)
    logits = lm(input_ids=ids, use_cache=False).logits[0].float()  # (T, V)
    logp = torch.log_softmax(logits[len(prompt) - 1:-1], dim=-1)
    return logp.gather(-1, ids[0, len(prompt):, None]).squeeze(-1)
