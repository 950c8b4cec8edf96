"""Where a policy's LoRA adapter goes: every linear layer except the output head (peft's
"all-linear"), vision modules excluded. One definition for the loader (train.policy.loader)
and the learner's tests and benchmarks; the update's own LoRA machinery is train.learn.lora.
"""
from __future__ import annotations

VISION_MODULES = r".*(visual|vision_tower|vision_model|image_encoder).*"
VISION_HINT = "vis"  # only models with vision modules need the exclusion


def add_lora(model, rank: int, alpha: int, init: bool | str = True):
    """Wrap `model` in a peft LoRA adapter; only the adapter's weights require grad."""
    from peft import LoraConfig, get_peft_model

    kwargs = dict(r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules="all-linear",
                  init_lora_weights=init, task_type="CAUSAL_LM")
    if any(VISION_HINT in name for name, _ in model.named_modules()):
        kwargs["exclude_modules"] = VISION_MODULES  # peft >= 0.14
    return get_peft_model(model, LoraConfig(**kwargs))
