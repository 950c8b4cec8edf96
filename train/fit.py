"""Does the run fit one GPU? Each phase's peak, estimated from the model config before loading.

`train run` calls :func:`check_fit` on a GPU before it loads anything: from the model
directory's config.json, the arm's caps and rows, the run's settings and the device's memory it
estimates the peak of each phase and stops with one line naming the setting to change when a
phase cannot fit, instead of an out-of-memory error an hour in.

Phases (train/run.py's order; bf16 base weights, LoRA adapter and AdamW state in fp32):

- `gen`: the engine's reservation (vLLM takes `gpu_memory_utilization` x the device: its
  weights, a KV pool, its activations and CUDA graphs) plus what the policy keeps on the GPU
  meanwhile (its base weights unless `policy_offload=host`, the adapter and its optimizer
  state). The KV pool must hold at least one row at the total cap, or vLLM refuses to start;
  when it holds less than the round's rows at once the engine queues rows (slower, not an OOM:
  `kv_rows_at_once` says how many fit).
- `step`: the update (its no-grad passes peak lower): base weights, adapter state, the saved
  activations of selective checkpointing (each layer's input, and the attention output of each
  full-attention layer) over a micro-batch of the token budget (the arm's total cap), one
  layer's recompute with its gradients, and one chunk of the output head in fp32. The loop keeps
  no layer on its first step; later steps keep as many as the memory left fits (train.learn.
  variant), so this is the step's floor.
- `sync`: the merged weight sync: the engine's weights awake plus the policy's (unless
  offloaded) and one merged tensor in fp32.

Calibrated against the peaks in benchmarks/RESULTS.md (the update of the 8B shape at 36,864
tokens: 45.6 GiB measured, 46.5 estimated; 65,536: 68.4 / 67.0; the 1.5B at 36,864: 15.6 /
16.3; the 27B hybrid on an H100 at 8,192: 69.0 / 67.9, at 10,240: 68.9 / 70.1;
tests/train/test_fit.py holds each). A phase fits when its estimate is under 0.97 of the card
less 6 GiB (`RESERVED`): the 27B's step at 12,288 tokens, estimated at 72.2 GiB, failed on an
H100 at 70.6 GiB allocated. Hybrid models (Qwen3.5) count KV for their full-
attention layers only, plus each linear-attention layer's recurrent state per running row.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

GIB = 2**30
BF16 = 2
ADAPTER_BYTES = 16  # fp32 weight + grad + AdamW's two moments, per adapter parameter
LOGPROB_CHUNK = 2048  # train.learn.step.StepConfig.logprob_chunk
ENGINE_OVERHEAD = 4 * GIB  # vLLM's activations at its batch size and CUDA graphs, beside weights and KV
MARGIN = 0.97  # of the device: the allocator's caching and fragmentation
# beside PyTorch's allocations: the CUDA context, cuBLAS and Triton workspaces and modules. On an
# H100 (79.2 GiB) the 27B's step ran at 68.9 GiB allocated and failed in a Triton kernel's load at
# 70.6 (benchmarks/RESULTS.md, issue 36): about 8 GiB of the card is not PyTorch's to allocate
RESERVED = 6 * GIB


@dataclass(frozen=True)
class Shape:
    """What the estimate reads from a config (the text model of a multimodal one)."""

    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool = False
    full_layers: int | None = None  # hybrid: layers with softmax attention (None: all)
    gate: bool = False  # q_proj also produces an output gate (twice as wide)
    lin_key_heads: int = 0
    lin_value_heads: int = 0
    lin_head_dim: int = 0
    conv_kernel: int = 4

    @property
    def attn_layers(self) -> int:
        return self.layers if self.full_layers is None else self.full_layers

    @property
    def linear_layers(self) -> int:
        return self.layers - self.attn_layers

    def linears(self) -> list[tuple[int, int, int]]:
        """(in, out, count) of every linear layer LoRA wraps (all but the output head)."""
        h, q = self.hidden, self.heads * self.head_dim
        kv = self.kv_heads * self.head_dim
        out = [(h, q * (2 if self.gate else 1), self.attn_layers), (h, kv, 2 * self.attn_layers),
               (q, h, self.attn_layers), (h, self.ffn, 2 * self.layers), (self.ffn, h, self.layers)]
        if self.linear_layers:
            key, value = self.lin_key_heads * self.lin_head_dim, self.lin_value_heads * self.lin_head_dim
            n = self.linear_layers
            out += [(h, 2 * key + value, n), (h, value, n), (h, self.lin_value_heads, 2 * n), (value, h, n)]
        return out

    @property
    def params(self) -> int:
        """Base parameters (the text model: the policy's LoRA and the engine skip a vision tower)."""
        body = sum(i * o * n for i, o, n in self.linears())
        embed = self.vocab * self.hidden * (1 if self.tied else 2)
        return body + embed + (2 * self.layers + 1) * self.hidden

    def adapter_params(self, rank: int) -> int:
        return sum(rank * (i + o) * n for i, o, n in self.linears())

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.attn_layers * self.kv_heads * self.head_dim * BF16

    @property
    def state_bytes_per_row(self) -> int:
        """Linear attention's recurrent state per running row (conv + delta-rule state, bf16)."""
        if not self.linear_layers:
            return 0
        key, value = self.lin_key_heads * self.lin_head_dim, self.lin_value_heads * self.lin_head_dim
        conv = (2 * key + value) * (self.conv_kernel - 1)
        return self.linear_layers * (conv + self.lin_value_heads * self.lin_head_dim ** 2) * BF16


def shape_of(config: dict) -> Shape:
    """The Shape of a Hugging Face config dict (a multimodal config's `text_config`)."""
    text = config.get("text_config") or config
    layers = text["num_hidden_layers"]
    heads = text["num_attention_heads"]
    types = text.get("layer_types")
    hybrid = text.get("model_type", "").startswith(("qwen3_5", "qwen3_next")) or (
        types is not None and "linear_attention" in types)
    full = None
    if hybrid:
        if types is None:
            interval = text.get("full_attention_interval", 4)
            types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
        full = sum(1 for t in types if t == "full_attention")
    return Shape(layers=layers, hidden=text["hidden_size"], ffn=text["intermediate_size"], heads=heads,
                 kv_heads=text.get("num_key_value_heads") or heads,
                 head_dim=text.get("head_dim") or text["hidden_size"] // heads, vocab=text["vocab_size"],
                 tied=bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
                 full_layers=full, gate=hybrid,
                 lin_key_heads=text.get("linear_num_key_heads", 0) if hybrid else 0,
                 lin_value_heads=text.get("linear_num_value_heads", 0) if hybrid else 0,
                 lin_head_dim=text.get("linear_key_head_dim", 0) if hybrid else 0,
                 conv_kernel=text.get("linear_conv_kernel_dim", 4))


@dataclass(frozen=True)
class Plan:
    """What the run asks of the GPU."""

    total_cap: int  # tokens of one row (prompt + response): the step's micro-batch budget too
    rows: int  # rows a round generates
    rank: int = 32  # LoRA rank
    utilization: float = 0.6  # vLLM's gpu_memory_utilization
    offload: bool = False  # policy_offload=host
    engine: bool = True  # a backend with weights of its own (vLLM); False: the policy generates
    mean_row_tokens: int = 0  # a round's average row (prompt + response) for `kv_rows_at_once`


@dataclass
class Phase:
    name: str
    parts: dict = field(default_factory=dict)  # component -> bytes

    @property
    def peak(self) -> int:
        return sum(self.parts.values())

    def line(self) -> str:
        parts = ", ".join(f"{k} {v / GIB:.1f}" for k, v in self.parts.items() if v)
        return f"{self.name} {self.peak / GIB:.1f} GiB ({parts})"


@dataclass
class Estimate:
    shape: Shape
    plan: Plan
    device_bytes: int
    phases: list[Phase]
    kv_pool: int
    kv_rows_at_once: int | None
    problems: list[str]  # each: what cannot fit, and the setting to change

    @property
    def fits(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        return {"params_b": round(self.shape.params / 1e9, 3), "device_gib": round(self.device_bytes / GIB, 1),
                **{f"{p.name}_gib": round(p.peak / GIB, 1) for p in self.phases},
                "kv_pool_gib": round(self.kv_pool / GIB, 1), "kv_rows_at_once": self.kv_rows_at_once,
                "fits": self.fits, "problems": self.problems}


def step_activations(shape: Shape, tokens: int) -> dict:
    """The update's activation bytes at a micro-batch of `tokens` (keep no layer, selective
    checkpointing): saved inputs and attention outputs, one layer's recompute, the head chunk."""
    t, h = tokens, shape.hidden
    q = shape.heads * shape.head_dim
    attn = q * (2 if shape.gate else 1) + 2 * shape.kv_heads * shape.head_dim + q
    layer = 4 * shape.ffn + 3 * h + 2 * attn
    if shape.linear_layers:
        key, value = shape.lin_key_heads * shape.lin_head_dim, shape.lin_value_heads * shape.lin_head_dim
        layer = max(layer, 4 * shape.ffn + 3 * h + 2 * (2 * key + value) + 4 * value)
    return {"saved": shape.layers * t * h * BF16 + shape.attn_layers * t * q * BF16,
            "recompute": t * layer * BF16,
            "head": LOGPROB_CHUNK * shape.vocab * 4 * 3 + 2 * t * h * BF16}


def largest_step(shape: Shape, fixed: int, limit: float) -> int:
    """The largest micro-batch (a multiple of 1,024 tokens) whose step fits `limit`; 0: none."""
    low, high = 0, 1 << 20
    while high - low > 1024:
        mid = (low + high) // 2 // 1024 * 1024
        if fixed + sum(step_activations(shape, mid).values()) <= limit:
            low = mid
        else:
            high = mid
    return low


def estimate(config: dict, plan: Plan, device_bytes: int) -> Estimate:
    shape = shape_of(config)
    weights = shape.params * BF16
    adapter = shape.adapter_params(plan.rank) * ADAPTER_BYTES
    resident = 0 if plan.offload else weights
    phases, problems = [], []
    kv_pool, at_once = 0, None
    if plan.engine:
        reserved = int(plan.utilization * device_bytes)
        kv_pool = reserved - weights - ENGINE_OVERHEAD
        phases.append(Phase("gen", {"engine": reserved, "policy weights": resident, "adapter": adapter}))
        row = shape.kv_bytes_per_token * plan.total_cap + shape.state_bytes_per_row
        if plan.mean_row_tokens:
            at_once = max(0, kv_pool) // (shape.kv_bytes_per_token * plan.mean_row_tokens + shape.state_bytes_per_row)
        if kv_pool < row:
            need = (weights + ENGINE_OVERHEAD + row) / device_bytes
            problems.append(f"the engine's KV pool ({kv_pool / GIB:.1f} GiB at gpu_memory_utilization "
                            f"{plan.utilization}) holds no row at the total cap of {plan.total_cap} "
                            f"({row / GIB:.1f} GiB): raise --set gpu_memory_utilization to at least {need:.2f}"
                            + ("" if plan.offload else " (with --set policy_offload=host)"))
    else:
        phases.append(Phase("gen", {"policy weights": weights, "adapter": adapter}))
    acts = step_activations(shape, plan.total_cap)
    phases.append(Phase("step", {"policy weights": weights, "adapter": adapter, **acts}))
    if plan.engine:
        biggest = max(i * o for i, o, _ in shape.linears())
        phases.append(Phase("sync", {"engine weights": weights, "policy weights": resident, "adapter": adapter,
                                     "merged tensor": biggest * 4 * 2}))
    limit = MARGIN * device_bytes - RESERVED
    for phase in phases:
        if phase.peak <= limit:
            continue
        if phase.name in ("gen", "sync") and not plan.offload and plan.engine and phase.peak - weights <= limit:
            fix = "--set policy_offload=host (the policy's base weights in host memory while the engine has the GPU)"
        elif phase.name == "gen" and plan.engine:
            fix = f"lower --set gpu_memory_utilization (now {plan.utilization})"
        elif phase.name == "step":
            most = largest_step(shape, weights + adapter, limit)
            fix = (f"lower --set total_cap to at most {most} (now {plan.total_cap}: the update's micro-batch)" if most
                   else "a larger device (the weights and the adapter's state alone do not leave room for a step)")
        else:
            fix = "a larger device (the weights alone do not fit)"
        problems.append(f"{phase.line()} does not fit the device's {device_bytes / GIB:.1f} GiB: {fix}")
    return Estimate(shape, plan, device_bytes, phases, kv_pool, at_once, problems)


def read_config(model_dir) -> dict | None:
    path = Path(model_dir) / "config.json"
    return json.loads(path.read_text()) if path.is_file() else None


def device_memory(knobs) -> int | None:
    """--set device_memory_gib, else the CUDA device's total memory (None without one)."""
    if knobs.device_memory_gib:
        return int(knobs.device_memory_gib * GIB)
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return torch.cuda.mem_get_info()[1]


def run_plan(arm, knobs, opts, backend: str, rows: int) -> Plan:
    return Plan(total_cap=arm.total_cap or 4096, rows=rows, rank=arm.lora_rank or 32,
                utilization=arm.gpu_memory_utilization or 0.6, offload=knobs.policy_offload == "host",
                engine=backend == "vllm", mean_row_tokens=min(arm.total_cap or 4096, 10000))


def check_fit(model_dir, arm, knobs, opts, backend: str, rows: int, log=print) -> Estimate | None:
    """Log each phase's estimated peak and stop with one line when a phase cannot fit (GPU runs
    only, or wherever --set device_memory_gib names a device)."""
    from warehouse.errors import TerminalError

    config = read_config(model_dir)
    device = device_memory(knobs)
    if config is None or device is None or not opts.learn:
        return None
    result = estimate(config, run_plan(arm, knobs, opts, backend, rows), device)
    log("Fit (estimated, train.fit): " + "; ".join(p.line() for p in result.phases)
        + f"; device {device / GIB:.1f} GiB")
    if result.problems:
        raise TerminalError(f"{Path(model_dir).name} at {arm.name}'s caps: {result.problems[0]}")
    return result
