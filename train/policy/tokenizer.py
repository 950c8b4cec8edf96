"""A small byte-level BPE tokenizer, trained locally with the `tokenizers` library.

Byte-level, so any text round-trips (no unknown tokens); ChatML-style special tokens and
chat template, so the tiny policy goes through `apply_chat_template` exactly as a Qwen
checkpoint does.
"""
from __future__ import annotations

from collections.abc import Iterable

PAD, IM_START, IM_END, EOT = "<|pad|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>"
SPECIAL_TOKENS = [PAD, IM_START, IM_END, EOT]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 2048, max_token_length: int = 16):
    """A PreTrainedTokenizerFast with byte-level BPE merges learnt from `texts`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    # No word-splitting regex: merges may span words (up to max_token_length bytes), so the
    # highly repetitive prompts and scripts compress about 3x and the tiny model trains fast.
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  max_token_length=max_token_length, show_progress=False)
    core.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, eos_token=IM_END,
                                        bos_token=EOT, unk_token=None)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer
