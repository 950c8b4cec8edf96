"""The generation interface every backend implements.

A round asks for `GenRequest`s (one per expansion: the prompt messages and how many siblings)
and gets back, per request, one `Completion` per sibling: the prompt messages, the raw
completion, the thinking (when the chat template separates it), the response token ids and
the sampled tokens' logprobs.

Caps are enforced here, the same way for every backend (`plan_prompts`):
- a prompt longer than `prompt_cap` tokens is an error for that request's nodes
  (`Completion.error`), never a silent truncation;
- the response is capped at `max_new_tokens`, and further so that prompt + response stays
  within `total_cap`.
Logprobs are those of the sampling distribution, log_softmax(logits / temperature), before any
top-k/top-p filtering; at temperature 1 they are the model's own logprobs.

What a backend supports beyond `generate(requests, sampling)` it declares in its
`capabilities` (a `Capabilities`); callers read that, never the signature or the attributes.
A backend that `--backend` names declares at class level what every instance supports, for
the decisions taken before it exists (train.generate.choice.backend_class: whether FSDP ranks
need a generation copy of the policy); an instance declares the rest, from its settings.
Every backend also carries `notes` (lines the run prints before round 1) and `device` (where it
generates, for `--set overlap_exec=auto`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from train.policy.chat import prompt_token_ids, split_thinking

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class SamplingConfig:
    max_new_tokens: int
    prompt_cap: int | None = None
    total_cap: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k filtering
    seed: int = 0
    # benchmarks on random weights: each row's length forced from this mix, EOS ignored
    # (train.generate.lengths; "off": the policy's own lengths)
    forced_lengths: str = "off"


@dataclass(frozen=True)
class GenRequest:
    messages: list
    n: int  # siblings sampled from this prompt


@dataclass
class Completion:
    prompt_messages: list
    raw_completion: str = ""
    thinking: str | None = None
    response_token_ids: list = field(default_factory=list)
    response_logprobs: list = field(default_factory=list)
    prompt_token_ids: list = field(default_factory=list)
    error: str | None = None  # set when the node could not be generated (e.g. prompt over cap)

    @property
    def answer(self) -> str:
        """The completion without its thinking: what the extraction contract reads."""
        return split_thinking(self.raw_completion)[1]


@dataclass(frozen=True)
class PromptPlan:
    """One request after tokenization: its ids and response budget, or why it cannot run."""

    token_ids: list
    max_new_tokens: int
    error: str | None = None


class PromptTooLongError(ValueError):
    """A prompt is longer than the arm's prompt cap (recorded on the node, not raised)."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend supports beyond `generate(requests, sampling)`; every field off by default.

    - `adapter_swap`: `set_adapter(adapter_dir) -> id` serves a LoRA adapter saved there (the
      loop's `update_weights` saves and serves the updated adapter); without it the backend
      samples from the trained module itself (train.weight_sync).
    - `logprobs`: each completion's `response_logprobs` holds the sampled tokens' logprobs, one
      per response token (the warehouse records them).
    - `streaming`: `generate(..., on_request=f)` calls `f(i, completions)` as soon as every row of
      request `i` has ended, while the call goes on (the round executes that sibling group
      meanwhile); it returns every request's completions as well.
    - `ranks`: `generate(..., indices=[...])` generates only those requests of the call, in that
      order, each row with the noise it has in the whole call, so several ranks each generating
      a share yield one process's tokens (train.generate.ranks).
    - `weight_load`: `load_weights(model)` loads the trained policy's weights, every LoRA delta
      merged in, into the backend's own copy in place (vLLM's merged sync).
    - `sleep`: `sleep()` frees the backend's device memory until its next call or weight load
      (vLLM's sleep mode), so the GRPO step has the GPU.
    - `own_weights`: the backend loads the model from its directory into weights of its own
      (vLLM's engine) instead of sampling from the trained module: a resumed run's weights must
      be loaded into it before round 1, and FSDP ranks need no generation copy of the policy
      for it (train.weight_sync).
    """

    adapter_swap: bool = False
    logprobs: bool = False
    streaming: bool = False
    ranks: bool = False
    weight_load: bool = False
    sleep: bool = False
    own_weights: bool = False


class Backend(Protocol):
    capabilities: Capabilities
    notes: list[str]  # lines the run prints before round 1 (vLLM: its length bounded by the model's)
    device: torch.device | None  # where it generates; None: over several ranks' devices (train.generate.ranks)

    def generate(self, requests: list[GenRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        """One list of `request.n` completions per request, in order; the keywords that
        `capabilities` declares (`on_request=`, `indices=`) where it declares them."""


def plan_prompts(tokenizer, requests: list[GenRequest], sampling: SamplingConfig) -> list[PromptPlan]:
    """Tokenize every request's prompt and check it against the caps."""
    return [plan_prompt(prompt_token_ids(tokenizer, r.messages), sampling) for r in requests]


def plan_prompt(ids: list[int], sampling: SamplingConfig) -> PromptPlan:
    if sampling.prompt_cap is not None and len(ids) > sampling.prompt_cap:
        return PromptPlan(ids, 0, f"PromptTooLongError: prompt has {len(ids)} tokens, over the "
                                  f"prompt cap of {sampling.prompt_cap}; shorten the prompt or raise prompt_cap")
    budget = sampling.max_new_tokens
    if sampling.total_cap is not None:
        budget = min(budget, sampling.total_cap - len(ids))
    if budget <= 0:
        return PromptPlan(ids, 0, f"PromptTooLongError: prompt has {len(ids)} tokens, leaving no "
                                  f"room under the total cap of {sampling.total_cap}")
    return PromptPlan(ids, budget)


def completion_from_tokens(tokenizer, messages: list, prompt_ids: list[int], token_ids: list[int],
                           logprobs: list[float]) -> Completion:
    """A Completion for one sampled response (special tokens dropped from the text)."""
    text = tokenizer.decode(token_ids, skip_special_tokens=True)
    thinking, _ = split_thinking(text)
    return Completion(prompt_messages=messages, raw_completion=text, thinking=thinking,
                      response_token_ids=list(token_ids), response_logprobs=list(logprobs),
                      prompt_token_ids=list(prompt_ids))


def failed(messages: list, plan: PromptPlan, n: int) -> list[Completion]:
    return [Completion(prompt_messages=messages, prompt_token_ids=list(plan.token_ids), error=plan.error)
            for _ in range(n)]
