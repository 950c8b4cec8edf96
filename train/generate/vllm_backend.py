"""Generation with vLLM (when installed): `LLM` + `SamplingParams` + `LoRARequest`.

Written against vLLM's public offline API. Two traps from the seeds' harness are closed here:
- `max_lora_rank=32`: vLLM's default cap is 16, below the arms' rank 32;
- every weight update gets a NEW adapter id (`LoRARequest` ids are never reused): vLLM caches
  prefixes per adapter id, so reusing an id after an update serves stale cached prefixes.
vLLM is not installed on the CPU machines here; importing this module is safe, constructing
`VLLMBackend` without vLLM raises a one-line error saying how to install it.
"""
from __future__ import annotations

import itertools

from train.generate.base import (Completion, GenRequest, SamplingConfig, completion_from_tokens,
                                 failed, plan_prompts)
from warehouse.errors import TerminalError

MAX_LORA_RANK = 32
_adapter_ids = itertools.count(1)  # process-wide: an id is never handed out twice


def next_adapter_id() -> int:
    return next(_adapter_ids)


class VLLMBackend:
    """`Backend` over a vLLM engine; `set_adapter(path)` after each weight update."""

    def __init__(self, model_path: str, tokenizer, gpu_memory_utilization: float = 0.6,
                 max_model_len: int | None = None, seed: int = 0, enable_lora: bool = True,
                 tensor_parallel_size: int = 1):
        try:
            from vllm import LLM
        except ImportError:
            raise TerminalError("vLLM is not installed: `pip install rollout-warehouse[vllm]` "
                                "on a GPU machine, or use --backend hf.") from None
        self.tokenizer = tokenizer
        self.llm = LLM(model=str(model_path), enable_lora=enable_lora, max_lora_rank=MAX_LORA_RANK,
                       gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                       seed=seed, enable_prefix_caching=True,
                       tensor_parallel_size=tensor_parallel_size)  # `--set tensor_parallel_size=N`
        self.lora_request = None

    def set_adapter(self, adapter_dir: str) -> int:
        """Serve the LoRA adapter saved in `adapter_dir` under a fresh id; returns the id."""
        from vllm.lora.request import LoRARequest

        adapter_id = next_adapter_id()
        self.lora_request = LoRARequest(f"policy-{adapter_id}", adapter_id, str(adapter_dir))
        return adapter_id

    def generate(self, requests: list[GenRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        from vllm import SamplingParams

        plans = plan_prompts(self.tokenizer, requests, sampling)
        live = [i for i, p in enumerate(plans) if p.error is None]
        params = [SamplingParams(n=requests[i].n, temperature=sampling.temperature, top_p=sampling.top_p,
                                 top_k=sampling.top_k or -1, max_tokens=plans[i].max_new_tokens,
                                 logprobs=0, seed=sampling.seed + i) for i in live]
        prompts = [{"prompt_token_ids": plans[i].token_ids} for i in live]
        outputs = self.llm.generate(prompts, params, lora_request=self.lora_request) if live else []
        out = [failed(r.messages, p, r.n) if p.error else [] for r, p in zip(requests, plans)]
        for i, result in zip(live, outputs):
            out[i] = [self._completion(requests[i], plans[i], sample) for sample in result.outputs]
        return out

    def _completion(self, request: GenRequest, plan, sample) -> Completion:
        ids = list(sample.token_ids)
        # logprobs=0: one dict per position holding the sampled token's Logprob.
        lps = [step[tok].logprob for tok, step in zip(ids, sample.logprobs or [])]
        return completion_from_tokens(self.tokenizer, request.messages, plan.token_ids, ids, lps)
