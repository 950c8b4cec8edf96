"""The trainable policy: a base causal LM with its LoRA adapter (train.policy.lora.add_lora),
ready for the update.

Rank and alpha come from the arm. Gradient checkpointing is on (non-reentrant, so frozen
inputs need no requires_grad hack).
"""
from __future__ import annotations

import contextlib


def save_attention_policy():
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
                         keep_layers: int = 0, fuse: bool = True):
    """Checkpointing on (optionally selective; the last `keep_layers` decoder layers keep
    their activations, trading spare memory for no recompute); LoRA fused into addmm
    (`fuse_lora`, same math). Compiled norms are :func:`compiled_norms`, for the update only."""
    from train.learn.logprobs import causal_lm

    if fuse:
        fuse_lora(policy)
    lm = causal_lm(policy)
    if gradient_checkpointing:
        kwargs = {"use_reentrant": False}
        if selective:
            kwargs["context_fn"] = save_attention_policy()
        if hasattr(lm, "activation_checkpointing_enable"):  # transformers >= 5.2x's name
            lm.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        if hasattr(lm, "disable_input_require_grads"):
            # transformers adds a hook making the embeddings' output require grad; non-reentrant
            # checkpointing needs none, and on CUDA the hook breaks the generator's compiled
            # decode step when it shares this module (a single-process `train run`)
            lm.disable_input_require_grads()
        keep_last_layers(policy, keep_layers)
    return policy  # the learner passes use_cache=False itself; generation keeps its cache


def keep_last_layers(policy, count: int) -> int:
    """The last `count` checkpointed decoder layers keep their activations, the others recompute
    them; returns how many are kept. Same math either way (checkpointing trades recompute for
    memory), so the learner may change `count` between steps."""
    from train.learn.logprobs import causal_lm

    lm = causal_lm(policy)
    layers = [m for m in lm.modules() if hasattr(m, "_gradient_checkpointing_func")
              and m is not lm and type(m).__name__.endswith("DecoderLayer")]  # checkpointing enabled
    count = max(0, min(count, len(layers)))
    for index, layer in enumerate(layers):
        layer.gradient_checkpointing = index < len(layers) - count
    return count


@contextlib.contextmanager
def compiled_norms(policy, enabled: bool = True):
    """Every RMSNorm under torch.compile while inside (the update, its backward's recompute
    included), eager again after (GPU: -0.7 s of 7 s at 36864 tokens on the 8B, see
    benchmarks/RESULTS.md). Only inside: in a single-process run the generator shares this
    module and captures its decode step as CUDA graphs (paged); a norm compiled for good would
    be captured inside those. The
    compiled code is kept by torch between entries (same code, no recompile)."""
    norms = [m for m in policy.modules() if type(m).__name__.endswith("RMSNorm")] if enabled else []
    try:
        for module in norms:
            module.compile(dynamic=True)  # Module.__call__ runs _compiled_call_impl when set
        yield len(norms)
    finally:
        for module in norms:
            module._compiled_call_impl = None


def adapter_parameters(policy) -> list:
    return [p for p in policy.parameters() if p.requires_grad]


def make_optimizer(policy, lr: float):
    """AdamW over the adapter only."""
    import torch

    return torch.optim.AdamW(adapter_parameters(policy), lr=lr, weight_decay=0.0)


def mixed_precision(policy):
    """bf16 compute for a bf16 base with fp32 adapter weights (peft's default).

    peft casts each LoRA input to the adapter's fp32 dtype, which on a 36864-token row costs
    an fp32 copy of the activations per adapted layer (memory and time). Under bf16 autocast
    with that cast turned off, the adapter matmuls run in bf16 from the fp32 master weights.
    A no-op for an fp32 base (CPU). Keep it on for backward too: the checkpointed recompute
    reads the modules' flags.
    """
    import torch

    from train.learn.logprobs import causal_lm

    head = causal_lm(policy).get_output_embeddings().weight
    if head.dtype not in (torch.bfloat16, torch.float16):
        return contextlib.nullcontext()
    return _autocast_without_input_casts(policy, head.device.type, head.dtype)


def _autocast_without_input_casts(policy, device_type, dtype):
    import torch

    @contextlib.contextmanager
    def ctx():
        with lora_input_casts_off(policy), torch.autocast(device_type=device_type, dtype=dtype):
            yield

    return ctx()


@contextlib.contextmanager
def lora_input_casts_off(policy, enabled: bool = True):
    """peft's cast of each LoRA layer's input to the adapter's dtype, off while inside. Keep a
    checkpointed backward inside too: its recompute reads the flags, and a recomputed tensor of
    another dtype than the forward's is an error."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    layers = [m for m in policy.modules() if isinstance(m, BaseTunerLayer)] if enabled else []
    saved = [getattr(m, "cast_input_dtype_enabled", True) for m in layers]
    try:
        for m in layers:
            m.cast_input_dtype_enabled = False
        yield
    finally:
        for m, flag in zip(layers, saved):
            m.cast_input_dtype_enabled = flag


def fuse_lora(policy) -> int:
    """Replace each LoRA Linear's forward by base GEMM + one addmm for the low-rank term.

    peft computes base(x) + scale * B(A(x)) as separate kernels: the (T, out) product of B,
    a scale, an add. addmm folds the scale and the add into the second GEMM (beta = 1), which
    removes three passes over a (T, out) tensor per adapted layer, forward and backward. Same
    math, LoRA dropout included (applied to the input in the compute dtype, where peft applies
    it after its cast to the adapter's dtype: the same masks' law, other random draws);
    anything unusual (adapter disabled, merged, DoRA, several adapters) falls back to peft's
    forward. Returns how many layers were fused.
    """
    import types

    from peft.tuners.lora.layer import Linear as LoraLinear

    count = 0
    for module in policy.modules():
        if isinstance(module, LoraLinear) and not hasattr(module, "_unfused_forward"):
            module._unfused_forward = module.forward
            module.forward = types.MethodType(_fused_forward, module)
            count += 1
    return count


def _fused_forward(self, x, *args, **kwargs):
    import torch
    import torch.nn.functional as F

    names = self.active_adapters
    name = names[0] if len(names) == 1 else None
    if (args or kwargs or self.disable_adapters or self.merged or name not in self.lora_A
            or self.use_dora.get(name)):
        return self._unfused_forward(x, *args, **kwargs)
    device = x.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype
    result = self.base_layer(x)  # (..., out)
    low = F.linear(self.lora_dropout[name](x.to(dtype)), self.lora_A[name].weight.to(dtype))  # (..., r)
    out = torch.addmm(result.reshape(-1, result.shape[-1]), low.reshape(-1, low.shape[-1]),
                      self.lora_B[name].weight.to(dtype).t(), alpha=self.scaling[name])
    return out.view(result.shape)
