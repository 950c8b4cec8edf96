"""The policy: model and tokenizer loading (real checkpoints or the tiny CPU policy), LoRA."""
