"""The trainable policy: a base causal LM plus a fresh LoRA adapter, ready for the update.

LoRA on every linear layer except the output head (peft's "all-linear"), vision modules
excluded; rank and alpha come from the arm. Gradient checkpointing is on (non-reentrant, so
frozen inputs need no requires_grad hack), the KV cache off during training.
"""
from __future__ import annotations

VISION_MODULES = r".*(visual|vision_tower|vision_model|image_encoder).*"


def add_lora(model, rank: int, alpha: int, init: bool | str = True):
    """Wrap `model` in a peft LoRA adapter; only the adapter's weights require grad."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules="all-linear",
        exclude_modules=VISION_MODULES, init_lora_weights=init, task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def _save_attention_policy():
    """Selective checkpointing: keep attention outputs, recompute the rest of the layer.

    The recompute in backward then redoes the (cheap, memory-bound) linears and norms but not
    the attention kernel, which at 36864 tokens is a third of the forward FLOPs. Cost: the
    attention output, (T, heads * head_dim) bf16 per layer.
    """
    import functools

    import torch
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    aten = torch.ops.aten
    saved = {getattr(aten, name).default for name in (
        "_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention_for_cpu",
    ) if hasattr(aten, name)}

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in saved else CheckpointPolicy.PREFER_RECOMPUTE

    return functools.partial(create_selective_checkpoint_contexts, policy)


def prepare_for_training(policy, gradient_checkpointing: bool = True, selective: bool = False,
                         keep_layers: int = 0):
    """Checkpointing on (optionally selective; the last `keep_layers` decoder layers keep
    their activations, trading spare memory for no recompute), KV cache off."""
    from train.learn.logprobs import causal_lm

    lm = causal_lm(policy)
    if gradient_checkpointing:
        kwargs = {"use_reentrant": False}
        if selective:
            kwargs["context_fn"] = _save_attention_policy()
        lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        layers = [m for m in lm.modules() if hasattr(m, "gradient_checkpointing")
                  and m is not lm and type(m).__name__.endswith("DecoderLayer")]
        for layer in layers[len(layers) - keep_layers:] if keep_layers else []:
            layer.gradient_checkpointing = False
    lm.config.use_cache = False
    return policy


def adapter_parameters(policy) -> list:
    return [p for p in policy.parameters() if p.requires_grad]


def make_optimizer(policy, lr: float):
    """AdamW over the adapter only."""
    import torch

    return torch.optim.AdamW(adapter_parameters(policy), lr=lr, weight_decay=0.0)
