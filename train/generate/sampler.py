"""Batched sampling with a KV cache: the per-row sampler every generator of ours shares, and
the plain decode loop the paged generator is tested against.

`sample_next` draws each row's token from noise that depends only on (seed, row, step)
(`row_noise`), which is what makes the paged generator's tokens independent of batching and
preemption. `decode` runs all rows in one left-padded batch over transformers' DynamicCache,
the attention mask grown each step: `HFBackend(paged=False)`, the reference. (A static-cache,
compiled variant for the GPU was removed: it lost to the paged path by 8x or more and to vLLM
everywhere, benchmarks/RESULTS.md.) Decode steps attend with :mod:`train.generate.decode_attention`
(grouped-query heads without copying the cache); prompts keep transformers' SDPA.
Rows stop at an EOS token or at their own response budget; finished rows keep decoding
padding until the whole batch is done (their tokens are dropped).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

from train.generate.decode_attention import decode_attention


@dataclass
class Batch:
    """Left-padded prompts and per-row budgets."""

    input_ids: object  # (B, P) long
    mask: object  # (B, P + T) long: 1 on real prompt tokens and on every response slot
    pad_len: object  # (B,) long: left padding per row
    budgets: object  # (B,) long: max new tokens per row
    prompt_width: int  # P
    steps: int  # T = max budget


def make_batch(prompts: list[list[int]], budgets: list[int], pad_id: int, device) -> Batch:
    import torch

    width, steps = max(map(len, prompts)), max(budgets)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)  # (B, P)
    mask = torch.ones((len(prompts), width + steps), dtype=torch.long)  # (B, P+T)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
        mask[row, : width - len(prompt)] = 0
    pad_len = torch.tensor([width - len(p) for p in prompts], dtype=torch.long)
    return Batch(ids.to(device), mask.to(device), pad_len.to(device),
                 torch.tensor(budgets, dtype=torch.long, device=device), width, steps)


M32 = 0xFFFFFFFF


def _mix(x):
    """lowbias32 (a 32-bit integer hash) on int64 tensors or Python ints holding 32-bit values."""
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & M32
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def row_keys(seed: int, rows, device):
    """(B,) int64: the noise key of each row, from the call's sampling seed and the row's index
    in the request order of `generate` (never from which rows share its batch)."""
    import torch

    base = _mix(_mix(seed & M32) ^ ((seed >> 32) & M32))
    return torch.tensor([_mix(base ^ (int(r) & M32)) for r in rows], dtype=torch.long, device=device)


def row_noise(keys, steps, vocab: int):
    """(B, V) float32 Exp(1) draws, a function of (row key, step, vocab id) only.

    Counter-based: each entry hashes its own (key, step, id), elementwise on the device, with
    no generator state, so a row's draws at step t are the same whatever batch it runs in and
    however often it was preempted and recomputed."""
    import torch

    step_key = _mix((keys + steps * 0x9E3779B1) & M32)  # (B,)
    salt = _mix(step_key ^ 0x5BD1E995)  # (B,)
    ids = torch.arange(vocab, device=keys.device, dtype=torch.long)  # (V,)
    bits = _mix(_mix(step_key[:, None] ^ ids[None, :]) ^ salt[:, None])  # (B, V) in [0, 2^32)
    uniform = ((bits >> 8).float() + 0.5) * (1.0 / (1 << 24))  # (0, 1)
    return -torch.log(uniform)


def sample_next(logits, temperature: float, top_k: int, top_p: float, keys, steps):
    """(tokens (B,), logprobs (B,)) from last-position logits (B, V); logprobs before filtering.

    `keys` (B,) are the rows' noise keys (`row_keys`), `steps` (B,) or an int the index of the
    token being drawn in each row's response."""
    import torch

    logits = logits.float()
    if temperature <= 0:
        tokens = logits.argmax(-1)
        return tokens, torch.log_softmax(logits, -1).gather(-1, tokens[:, None])[:, 0]
    scaled = logits / temperature  # (B, V)
    logprobs = torch.log_softmax(scaled, -1)  # (B, V)
    probs = torch.softmax(_filter(scaled, top_k, top_p), -1)  # (B, V)
    # Exponential race: argmax(p / E), E ~ Exp(1), is a draw from p (as multinomial), with
    # per-row counter-based noise and no host sync.
    if not torch.is_tensor(steps):
        steps = torch.full_like(keys, int(steps))
    tokens = (probs / row_noise(keys, steps, probs.shape[-1])).argmax(-1)  # (B,)
    return tokens, logprobs.gather(-1, tokens[:, None])[:, 0]


def _filter(scaled, top_k: int, top_p: float):
    import torch

    if top_k and top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, descending=True, dim=-1)
        cumulative = torch.softmax(sorted_logits, -1).cumsum(-1)
        drop = cumulative - torch.softmax(sorted_logits, -1) > top_p  # keep the first over top_p
        scaled = scaled.scatter(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
    return scaled


def decode(model, batch: Batch, eos_ids: list[int], pad_id: int, sampling, keys) -> tuple[list[list[int]],
                                                                                       list[list[float]]]:
    """Sample every row to EOS or its budget; returns (token ids, logprobs) per row.
    `keys` (B,): each row's noise key (`row_keys`)."""
    import torch

    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    with torch.inference_mode(), warnings.catch_warnings(), decode_attention(model):
        # transformers 5.x renames past_key_values to cache; 4.x knows only the old name
        warnings.filterwarnings("ignore", message=".*past_key_values.*", category=FutureWarning)
        logits = _prefill(model, batch, cache)
        tokens_out, logprobs_out = [], []
        done = torch.zeros(batch.input_ids.shape[0], dtype=torch.bool, device=batch.input_ids.device)
        eos = torch.tensor(eos_ids, device=done.device)
        check_every = 1 if done.device.type == "cpu" else 16
        slots = torch.arange(batch.prompt_width, batch.prompt_width + batch.steps, device=done.device)  # (T,)
        for t in range(batch.steps):
            tokens, logprobs = sample_next(logits, sampling.temperature, sampling.top_k, sampling.top_p, keys, t)
            tokens = tokens.masked_fill(done, pad_id)
            tokens_out.append(tokens)
            logprobs_out.append(logprobs)
            done = done | torch.isin(tokens, eos) | (batch.budgets <= t + 1)
            # checking `done` syncs with the device: on GPU only every 16 steps
            if t + 1 == batch.steps or (t % check_every == check_every - 1 and bool(done.all())):
                break
            logits = _decode_step(model, batch, cache, tokens, t, slots)
    return _trim(torch.stack(tokens_out, 1), torch.stack(logprobs_out, 1), eos_ids, pad_id, batch.budgets)


def _prefill(model, batch: Batch, cache):
    """The padded batch in one forward into the dynamic cache."""
    import torch

    width = batch.prompt_width
    positions = torch.arange(width, device=batch.input_ids.device)[None, :] - batch.pad_len[:, None]
    out = model(input_ids=batch.input_ids, attention_mask=batch.mask[:, :width],
                position_ids=positions.clamp(min=0), past_key_values=cache, use_cache=True,
                cache_position=torch.arange(width, device=positions.device), logits_to_keep=1)
    return out.logits[:, -1]  # (B, V)


def _decode_step(model, batch: Batch, cache, tokens, t: int, slots):
    at = slots[t : t + 1]  # (1,) the cache slot of the token being fed; on device, no host copy
    position = (at - batch.pad_len)[:, None]  # (B, 1)
    mask = batch.mask[:, : batch.prompt_width + t + 1]
    out = model(input_ids=tokens[:, None], attention_mask=mask, position_ids=position,
                  past_key_values=cache, use_cache=True, cache_position=at)
    return out.logits[:, -1]


def _trim(tokens, logprobs, eos_ids, pad_id, budgets) -> tuple[list[list[int]], list[list[float]]]:
    """Each row's tokens up to and including its first EOS (or its budget)."""
    ids_rows, lp_rows = tokens.tolist(), logprobs.float().tolist()
    out_ids, out_lp = [], []
    for ids, lps, budget in zip(ids_rows, lp_rows, budgets.tolist()):
        end = min(len(ids), budget)
        for i, tok in enumerate(ids[:end]):
            if tok in eos_ids:
                end = i + 1
                break
        out_ids.append(ids[:end])
        out_lp.append(lps[:end])
    return out_ids, out_lp
