"""The scalar reward model: a causal LM loaded as a sequence classifier (one output, the
reward, read at each sequence's last token), LoRA on the attention and MLP projections, and
the pair encoding (chat template, left truncation, chosen and rejected in one forward).

`pack=True` puts the pair in ONE row without padding and with their shared prompt once:
[prompt | chosen answer | rejected answer], each answer attending to the prompt and itself
(:mod:`train.rm.pair_attention`: SDPA per part, no [T, T] mask); no compute goes to padding or
to a second copy of the prompt. Call it, and the backward, inside :func:`pair_attention`. `pack=False` is TRL's layout, a batch of two rows right-padded to the
longer one, but without TRL's attention mask (not needed under causal attention, see
`_padded_rewards`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class LoraSpec:
    rank: int = 128
    alpha: int = 256
    dropout: float = 0.05
    targets: tuple = LORA_TARGETS


def load_tokenizer(path: Path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token_id is None:  # Mistral ships none; the reward is read before padding anyway
        tokenizer.pad_token = tokenizer.unk_token or tokenizer.eos_token
    return tokenizer


def load_reward_model(path: Path, device, seed: int, pad_token_id: int):
    """The base model with a fresh scalar head drawn from `seed` (bf16 on GPU, fp32 on CPU)."""
    import torch
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # "score.weight newly initialized" is the point here
    hf_logging.disable_progress_bar()
    torch.manual_seed(seed)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, dtype=dtype)
    model.config.pad_token_id = pad_token_id
    return model.to(device)


def add_lora(model, spec: LoraSpec):
    """PEFT LoRA on the projections; the scalar head trains in full (modules_to_save)."""
    from peft import LoraConfig, TaskType, get_peft_model

    config = LoraConfig(task_type=TaskType.SEQ_CLS, r=spec.rank, lora_alpha=spec.alpha,
                        lora_dropout=spec.dropout, target_modules=list(spec.targets))
    return get_peft_model(model, config)


def encode(tokenizer, messages, max_length: int) -> list[int]:
    """Chat-templated token ids, truncated from the LEFT to `max_length` (the answer survives)."""
    text = tokenizer.apply_chat_template(list(messages), tokenize=False)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids[-max_length:]


def pair_rewards(model, chosen: list[int], rejected: list[int], device, pack: bool):
    """(r_chosen, r_rejected) from one forward of both sequences."""
    if pack:
        return _packed_rewards(model, chosen, rejected, device)
    return _padded_rewards(model, chosen, rejected, device)


def _padded_rewards(model, chosen, rejected, device):
    """Two rows, right-padded. No attention mask: under causal attention a real token never
    sees the padding after it, so the rewards (read at each row's last real token) are the
    same, and SDPA keeps its mask-free causal (flash) kernel."""
    import torch

    width = max(len(chosen), len(rejected))
    ids = torch.full((2, width), model.config.pad_token_id, dtype=torch.long)  # (2, T)
    for i, seq in enumerate((chosen, rejected)):
        ids[i, :len(seq)] = torch.tensor(seq)
    hidden = _backbone(model)(input_ids=ids.to(device), use_cache=False).last_hidden_state  # (2, T, H)
    last = torch.tensor([len(chosen) - 1, len(rejected) - 1], device=device)
    rewards = _head(model)(hidden[torch.arange(2, device=device), last]).squeeze(-1)  # (2,)
    return rewards[0], rewards[1]


def pair_attention(model, pack: bool, kernel: str = "flash"):
    """The attention the pair forward needs, for the forward AND the backward (a gradient-
    checkpointed layer recomputes its attention during backward)."""
    import contextlib

    from train.rm.pair_attention import pair_attention as shared_prefix_attention

    return shared_prefix_attention(model, kernel) if pack else contextlib.nullcontext()


def _packed_rewards(model, chosen, rejected, device):
    """One row [prompt | chosen answer | rejected answer]: the shared prompt once."""
    r_chosen, r_rejected = packed_rewards(model, [(chosen, rejected)], device)
    return r_chosen[0], r_rejected[0]


def packed_rewards(model, pairs, device):
    """(r_chosen (k,), r_rejected (k,)) for k pairs in ONE row without padding:
    [prompt 1 | chosen 1 | rejected 1 | prompt 2 | ...], each pair's positions from 0 and its
    parts attending as in :mod:`train.rm.pair_attention` (never to another pair). Call it, and the
    backward, inside :func:`pair_attention` with pack on."""
    import torch

    from train.rm.pair_attention import shared_prefix

    ids, positions, bounds, ends = [], [], [0], []
    for chosen, rejected in pairs:
        start, p = bounds[-1], shared_prefix(chosen, rejected)
        a, b = len(chosen) - p, len(rejected) - p
        ids += list(chosen) + list(rejected[p:])
        positions += list(range(p + a)) + list(range(p, p + b))
        bounds += [start + p, start + p + a, start + p + a + b]
        ends += [start + p + a - 1, start + p + a + b - 1]
    hidden = _backbone(model)(input_ids=torch.tensor([ids], device=device),
                              position_ids=torch.tensor([positions], device=device),
                              cu_seq_lens_q=torch.tensor(bounds, dtype=torch.int32),
                              use_cache=False).last_hidden_state  # (1, T, H)
    rewards = _head(model)(hidden[0, torch.tensor(ends, device=device)]).squeeze(-1).view(-1, 2)  # (k, 2)
    return rewards[:, 0], rewards[:, 1]


def packed_length(chosen, rejected) -> int:
    """Tokens the pair takes in a packed row: the shared prompt once, then both answers."""
    from train.rm.pair_attention import shared_prefix

    return len(chosen) + len(rejected) - shared_prefix(chosen, rejected)


def _backbone(model):
    """The transformer under the head (through a PEFT wrapper when there is one)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return getattr(inner, inner.base_model_prefix)


def _head(model):
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return inner.score
