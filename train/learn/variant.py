"""Which update variant the loop runs: the fastest measured one that fits the memory left after
generation (issue 18), chosen before each step and recorded in `step_metrics`.

Every step runs selective checkpointing (attention outputs saved) with fused LoRA; on top:
- kept layers: the last K decoder layers keep their activations (no recompute). K is as many as
  the headroom fits: the bytes free at the step's start, less the peak of a step that kept none
  (measured by the run's own first step, scaled up to the token budget), less a margin. Which
  layers are checkpointed does not change the math, only recompute against memory, so K may
  change between steps.
- compiled norms (CUDA only; on CPU the compile costs more than it saves), in force during the
  update only (train.learn.lora.compiled_norms).

Measured on one H200, 8B shape at 36,864 tokens (benchmarks/RESULTS.md, runs 1-4): sac 33.4%
MFU; + fused + compiled norms + 8 kept layers 40.4%; a kept layer costs 6.0-6.4 GiB there
without compiled norms (runs 1-2), about 5.1 with them (run 3), 4.5 with compiled MLPs too
(run 4, which the loop does not run).
"""
from __future__ import annotations

from dataclasses import dataclass

GIB = 2**30
# Bytes a kept layer holds per token, in bf16 values per unit of (hidden + intermediate): 6.4 GiB
# at 36,864 tokens on the 8B shape (hidden 4096, intermediate 12288) is 5.7 values; 6 covers
# that (runs 1-2, norms not compiled), the measured 5.1 GiB with compiled norms is below it.
KEPT_VALUES_PER_UNIT = 6
BF16_BYTES = 2
# Kept back from the headroom: the allocator's fragmentation at the peak, and a shape whose
# kept layer costs more than the constant says. An OOM ends the run; a layer too few costs ~1%.
MARGIN_FRACTION = 0.10  # of the bytes free at the step's start
MARGIN_MIN_BYTES = 2 * GIB


@dataclass(frozen=True)
class ModelShape:
    layers: int
    hidden: int
    intermediate: int

    @classmethod
    def of(cls, model) -> "ModelShape":
        """The decoder's shape from a (peft-wrapped) transformers model's config."""
        from train.learn.logprobs import causal_lm

        config = causal_lm(model).config
        config = getattr(config, "text_config", None) or config
        return cls(config.num_hidden_layers, config.hidden_size, config.intermediate_size)


@dataclass(frozen=True)
class VariantSetting:
    """`--set keep_layers=N` / `--set compile_norms=on|off`; None: chosen (auto)."""

    keep_layers: int | None = None
    compile_norms: bool | None = None


@dataclass(frozen=True)
class UpdateVariant:
    keep_layers: int = 0
    compile_norms: bool = False
    note: str = ""  # why a technique is off, or that it was set

    @property
    def name(self) -> str:
        """e.g. "sac+fused+keep8+normc" (the benchmark's words)."""
        parts = ["sac", "fused"] + ([f"keep{self.keep_layers}"] if self.keep_layers else [])
        return "+".join(parts + (["normc"] if self.compile_norms else []))


def kept_layer_bytes(shape: ModelShape, tokens: int) -> int:
    return KEPT_VALUES_PER_UNIT * BF16_BYTES * (shape.hidden + shape.intermediate) * tokens


def layers_that_fit(shape: ModelShape, tokens: int, free_bytes: int, base_peak_bytes: int) -> int:
    """Kept layers that fit in `free_bytes` beside a step that keeps none (`base_peak_bytes`
    above its start), less the margin; at most every layer."""
    margin = max(MARGIN_MIN_BYTES, int(MARGIN_FRACTION * free_bytes))
    headroom = free_bytes - base_peak_bytes - margin
    return max(0, min(shape.layers, headroom // kept_layer_bytes(shape, tokens)))


def choose_variant(shape: ModelShape, tokens: int, device_type: str, free_bytes: int | None,
                   base_peak_bytes: int | None, setting: VariantSetting = VariantSetting(),
                   sharded: bool = False) -> UpdateVariant:
    """The variant for a step whose largest micro-batch holds up to `tokens`; `free_bytes` are
    free for the update, `base_peak_bytes` the peak above its start of a step keeping none
    (None: not measured yet). Under FSDP nothing is kept unless set: each rank would choose
    from its own free memory, and kept layers were not measured sharded."""
    compile_norms = device_type == "cuda" and not sharded
    if setting.compile_norms is not None:
        compile_norms = setting.compile_norms
    if setting.keep_layers is not None:
        return UpdateVariant(min(setting.keep_layers, shape.layers), compile_norms, "set")
    if device_type != "cuda":
        return UpdateVariant(0, compile_norms, f"{device_type}: no layers kept")
    if sharded:
        return UpdateVariant(0, compile_norms, "fsdp: no layers kept")
    if free_bytes is None or base_peak_bytes is None:
        return UpdateVariant(0, compile_norms, "measuring the peak without kept layers")
    return UpdateVariant(layers_that_fit(shape, tokens, free_bytes, base_peak_bytes), compile_norms)


def resumed_base(extras: list[dict]) -> tuple[int, int] | None:
    """The base a resumed process starts from, out of the steps it resumes (their
    `step_metrics.extra`, oldest first): of those that kept no layer and recorded their peak, the
    one that packed the most tokens, the latest on a tie (what `UpdateVariants.measured` held in
    that process). None where none did (CPU, or every step kept layers): the first step measures."""
    base = None
    for extra in extras:
        if extra.get("update_keep_layers") != 0 or extra.get("update_peak_gib") is None \
                or not extra.get("largest_micro_batch"):
            continue
        entry = (int(extra["largest_micro_batch"]), int(extra["update_peak_gib"] * GIB))
        if base is None or entry[0] >= base[0]:
            base = entry
    return base


@dataclass
class UpdateVariants:
    """The loop's choice step by step: steps run without kept layers until one has measured its
    peak (or a resumed run's steps had: `resumed_base`), then keep what fits. The auto count never
    rises again: a count that only falls keeps each step's choice inside what the measured peak
    allowed before."""

    shape: ModelShape
    tokens: int  # the largest micro-batch a step may pack (StepConfig.token_budget)
    setting: VariantSetting = VariantSetting()
    sharded: bool = False
    base: tuple[int, int] | None = None  # (largest micro-batch, peak bytes above start) of a step keeping none
    ceiling: int | None = None  # the auto count chosen so far

    def base_peak(self) -> int | None:
        """The measured peak scaled up to the token budget (linearly: over, not under)."""
        if self.base is None:
            return None
        tokens, peak = self.base
        return peak * max(self.tokens, tokens) // max(tokens, 1)

    def choose(self, device_type: str, free_bytes: int | None) -> UpdateVariant:
        variant = choose_variant(self.shape, self.tokens, device_type, free_bytes, self.base_peak(),
                                 self.setting, self.sharded)
        if variant.note or self.base is None:
            return variant
        keep = variant.keep_layers if self.ceiling is None else min(variant.keep_layers, self.ceiling)
        self.ceiling = keep
        return UpdateVariant(keep, variant.compile_norms)

    def measured(self, variant: UpdateVariant, largest_tokens: int | None, peak_bytes: int | None) -> None:
        """A step's peak above its start; one that kept no layer (and packed at least as many
        tokens as the last such) becomes the base."""
        if variant.keep_layers or not largest_tokens or peak_bytes is None:
            return
        if self.base is None or largest_tokens >= self.base[0]:
            self.base = (largest_tokens, peak_bytes)


@dataclass(frozen=True)
class StepMemory:
    """The device's memory at a step's start (None on CPU)."""

    free: int | None = None  # free on the device + reserved by the caching allocator but unused
    allocated: int | None = None

    @classmethod
    def now(cls, device) -> "StepMemory":
        import torch

        if getattr(device, "type", device) != "cuda":
            return cls()
        allocated = torch.cuda.memory_allocated(device)
        spare = torch.cuda.memory_reserved(device) - allocated
        return cls(torch.cuda.mem_get_info(device)[0] + spare, allocated)

    def peak_above(self, device) -> int | None:
        """The step's peak (grpo_step resets the peak at its start) above the allocation at start."""
        import torch

        if self.allocated is None:
            return None
        return torch.cuda.max_memory_allocated(device) - self.allocated


def variant_metrics(variant: UpdateVariant, memory: StepMemory, peak_bytes: int | None) -> dict:
    """The choice as the step's metrics (`step_metrics.extra`)."""
    out = {"update_variant": variant.name, "update_keep_layers": variant.keep_layers,
           "update_compile_norms": variant.compile_norms}
    if variant.note:
        out["update_variant_note"] = variant.note
    if memory.free is not None:
        out["update_free_gib"] = round(memory.free / GIB, 2)
    if peak_bytes is not None:
        out["update_peak_gib"] = round(peak_bytes / GIB, 2)  # above the step's start
    return out
