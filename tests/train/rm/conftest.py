"""A tiny reward-model base built in the test session: a byte-level BPE tokenizer learnt on
the bundled synthetic texts and a 2-layer Llama saved with save_pretrained (no download)."""
from __future__ import annotations

import json

import pytest


def build_tiny_base(out, hidden: int = 64, layers: int = 2, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from train.policy.tokenizer import train_tokenizer
    from train.rm import synthetic

    texts = [line for path in (synthetic.PAIRS_FILE, synthetic.EVAL_FILE) for line in path.read_text().splitlines()]
    tokenizer = train_tokenizer(texts[:600], vocab_size=400)
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory):
    return build_tiny_base(tmp_path_factory.mktemp("tiny_rm_base"))


@pytest.fixture
def small_eval(tmp_path):
    """64 bundled evaluation rows, 16 per section (scoring all 640 is slow on a shared CPU)."""
    from train.rm import synthetic

    rows = [json.loads(line) for line in synthetic.EVAL_FILE.read_text().splitlines()]
    picked = [r for s in ("Chat", "Chat Hard", "Safety", "Reasoning") for r in [x for x in rows if x["section"] == s][:16]]
    path = tmp_path / "eval.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in picked))
    return path
