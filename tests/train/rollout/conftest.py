"""A tiny random Llama and a byte-level BPE tokenizer, built in the test (CPU, < 1 s)."""
from __future__ import annotations

import pytest

TEXTS = ["import pandas as pd\ntrain = pd.read_csv('input/train.csv')\n", "Write a first solution.",
         "```python\nprint('hello')\n```", "# Task\nPredict the target.", "You are an expert."] * 20


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from train.policy.tokenizer import train_tokenizer

    return train_tokenizer(TEXTS, vocab_size=400)


@pytest.fixture(scope="session")
def tiny_model(tiny_tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, pad_token_id=tiny_tokenizer.pad_token_id,
                         eos_token_id=tiny_tokenizer.eos_token_id, tie_word_embeddings=True)
    return LlamaForCausalLM(config).eval()


@pytest.fixture
def messages():
    def make(text: str) -> list[dict]:
        return [{"role": "system", "content": "You are an expert."}, {"role": "user", "content": text}]
    return make
