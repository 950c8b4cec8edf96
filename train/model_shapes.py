"""Model configs of real shapes, for the fit check's tests and the benchmarks on random weights.

Each is a Hugging Face `config.json` as a dict (nothing is downloaded; the shapes are the
published ones):

- `qwen3_5_27b`: the published data roots' model family at 27B, `Qwen3_5ForConditionalGeneration`: 64 layers,
  hidden 5,120, FFN 17,408, every fourth layer full attention (24 query heads over 4 KV groups of
  dim 256, with an output gate: q_proj is twice as wide), the other 48 gated-delta-net linear
  attention (16 key / 48 value heads of dim 128, conv kernel 4), vocab 248,320, and the vision
  tower (depth 27, hidden 1,152) that the policy's LoRA excludes;
- `qwen3_8b`, `qwen3_14b`, `qwen3_32b`: dense Qwen3 (151,936 vocab, untied head);
- `qwen3_5_tiny`, `qwen3_tiny`: the architectures at toy size (CPU tests; the hybrid's packed
  update needs flash-linear-attention, so on CPU only its config and loading are exercised).

`write_model_dir(name, target)` saves the config with a small byte-level tokenizer (vocabulary
2,048; the model's ids above it decode to nothing): a directory `train run --set
bench_random_weights=true` builds the model from, with no weights on disk.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path


def _qwen3(layers: int, hidden: int, ffn: int, heads: int, kv: int, positions: int = 40960) -> dict:
    return {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": hidden,
            "intermediate_size": ffn, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": kv, "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": False,
            "max_position_embeddings": positions, "rope_theta": 1000000, "rms_norm_eps": 1e-6,
            "hidden_act": "silu", "torch_dtype": "bfloat16"}


def _qwen3_5(layers: int, hidden: int, ffn: int, heads: int, kv: int, head_dim: int, lin_k: int, lin_v: int,
             lin_dim: int, vocab: int, vision: dict) -> dict:
    text = {"model_type": "qwen3_5_text", "hidden_size": hidden, "intermediate_size": ffn,
            "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv,
            "head_dim": head_dim, "full_attention_interval": 4, "attn_output_gate": True,
            "linear_conv_kernel_dim": 4, "linear_key_head_dim": lin_dim, "linear_value_head_dim": lin_dim,
            "linear_num_key_heads": lin_k, "linear_num_value_heads": lin_v, "vocab_size": vocab,
            "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "hidden_act": "silu",
            "tie_word_embeddings": False, "attention_bias": False,
            "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)],
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                                "mrope_interleaved": True, "mrope_section": [11, 11, 10]}}
    return {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
            "tie_word_embeddings": False, "text_config": text, "vision_config": vision,
            "torch_dtype": "bfloat16"}


VISION_27B = {"model_type": "qwen3_5", "depth": 27, "hidden_size": 1152, "intermediate_size": 4304,
              "num_heads": 16, "in_channels": 3, "patch_size": 16, "spatial_merge_size": 2,
              "temporal_patch_size": 2, "out_hidden_size": 5120, "num_position_embeddings": 2304,
              "hidden_act": "gelu_pytorch_tanh"}

SHAPES = {
    "qwen3_5_27b": _qwen3_5(64, 5120, 17408, 24, 4, 256, 16, 48, 128, 248320, VISION_27B),
    "qwen3_8b": _qwen3(36, 4096, 12288, 32, 8),
    "qwen3_14b": _qwen3(40, 5120, 17408, 40, 8),
    "qwen3_32b": _qwen3(64, 5120, 25600, 64, 8),
    "qwen3_tiny": {**_qwen3(2, 64, 128, 4, 2), "head_dim": 16, "vocab_size": 2048},
    "qwen3_5_tiny": _qwen3_5(4, 64, 128, 4, 2, 16, 2, 4, 16, 2048,
                             {**VISION_27B, "depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                              "out_hidden_size": 64}),
}


def shape_config(name: str) -> dict:
    from warehouse.errors import TerminalError

    if name not in SHAPES:
        raise TerminalError(f"model shape {name!r}: use one of {', '.join(sorted(SHAPES))}")
    return copy.deepcopy(SHAPES[name])


def write_model_dir(name: str, target: Path, texts: list[str] | None = None) -> Path:
    """`target` holding the shape's config.json and a 2,048-token tokenizer (no weights)."""
    from train.policy.tokenizer import train_tokenizer

    target = Path(target)
    if (target / "config.json").is_file():
        return target
    target.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(texts or _texts(), vocab_size=2048)
    config = shape_config(name)
    text = config.get("text_config", config)
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        text[key] = getattr(tokenizer, key)
        config[key] = getattr(tokenizer, key)
    tokenizer.save_pretrained(target)
    (target / "config.json").write_text(json.dumps(config, indent=1))
    return target


def _texts() -> list[str]:
    from train.env.tasks import BUNDLED_ROOT

    return [p.read_text(errors="replace") for p in sorted(BUNDLED_ROOT.rglob("*")) if p.is_file()
            and p.suffix in (".md", ".py", ".toml", ".txt")] * 4
