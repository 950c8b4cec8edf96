"""Tiny policies built in the test: a 2-layer Qwen2 (hidden 64, vocab 256) plus LoRA."""
from __future__ import annotations

import random

import pytest
import torch

from train.learn.lora import make_optimizer, prepare_for_training
from train.policy.lora import add_lora
from train.learn.step import Sample

VOCAB = 256


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny matmuls on a shared 2-core box: one thread is ~20x faster than two contending."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_base(seed: int = 0, layers: int = 2, vocab: int = VOCAB):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=vocab, max_position_embeddings=512,
        tie_word_embeddings=False,
    )
    return Qwen2ForCausalLM(config).float()


def tiny_policy(seed: int = 0, init=True, checkpointing: bool = True, vocab: int = VOCAB,
                fuse: bool = True):
    """A LoRA r32/a32 policy, prepared as the learner prepares it (fused LoRA unless
    fuse=False); init=False gives a random (non-zero) adapter."""
    policy = add_lora(tiny_base(seed, vocab=vocab), rank=32, alpha=32, init=init)
    return prepare_for_training(policy, gradient_checkpointing=checkpointing, fuse=fuse)


def random_samples(n: int = 6, seed: int = 0, groups: int = 2) -> list[Sample]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        prompt = [rng.randrange(VOCAB) for _ in range(rng.randint(3, 12))]
        response = [rng.randrange(VOCAB) for _ in range(rng.randint(2, 20))]
        out.append(Sample(prompt, response, reward=rng.random(), sibling_group=f"g{i % groups}"))
    return out


def optimizer_for(policy, lr: float = 1e-2):
    return make_optimizer(policy, lr)
