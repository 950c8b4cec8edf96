"""The transformers backend: shapes, caps, logprobs and padding, checked against plain forwards."""
from __future__ import annotations

import pytest
import torch

from train.generate.base import GenRequest, SamplingConfig, plan_prompt
from train.generate.hf import HFBackend
from train.policy.chat import prompt_token_ids, split_thinking


def _full_logprobs(model, prompt: list[int], response: list[int]) -> list[float]:
    """Each response token's logprob from one uncached forward over prompt + response."""
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()  # (T, V)
    lp = torch.log_softmax(logits[len(prompt) - 1:-1], -1)  # (R, V)
    return lp.gather(-1, torch.tensor(response)[:, None])[:, 0].tolist()


def test_siblings_come_back_per_request_with_matching_logprobs(tiny_model, tiny_tokenizer, messages):
    backend = HFBackend(tiny_model, tiny_tokenizer)
    requests = [GenRequest(messages("Write a first solution."), 3), GenRequest(messages("# Task\nPredict"), 2)]
    out = backend.generate(requests, SamplingConfig(max_new_tokens=12, seed=1))
    assert [len(group) for group in out] == [3, 2]
    for request, group in zip(requests, out):
        prompt = prompt_token_ids(tiny_tokenizer, request.messages)
        for c in group:
            assert c.error is None and 1 <= len(c.response_token_ids) <= 12
            assert len(c.response_logprobs) == len(c.response_token_ids)
            assert c.prompt_token_ids == prompt
            expected = _full_logprobs(tiny_model, prompt, c.response_token_ids)
            assert c.response_logprobs == pytest.approx(expected, abs=1e-4)
    assert len({tuple(c.response_token_ids) for c in out[0]}) > 1  # siblings differ


def test_left_padding_does_not_change_greedy_output(tiny_model, tiny_tokenizer, messages):
    backend = HFBackend(tiny_model, tiny_tokenizer)
    greedy = SamplingConfig(max_new_tokens=10, temperature=0.0)
    short, long = messages("Write"), messages("# Task\nPredict the target. " * 3)
    together = backend.generate([GenRequest(short, 1), GenRequest(long, 1)], greedy)
    alone = [backend.generate([GenRequest(m, 1)], greedy)[0][0] for m in (short, long)]
    assert [g[0].response_token_ids for g in together] == [a.response_token_ids for a in alone]


def test_same_seed_same_samples_other_seed_other_samples(tiny_model, tiny_tokenizer, messages):
    backend = HFBackend(tiny_model, tiny_tokenizer)
    req = [GenRequest(messages("Write a first solution."), 4)]
    ids = lambda seed: [c.response_token_ids for c in backend.generate(req, SamplingConfig(16, seed=seed))[0]]  # noqa: E731
    assert ids(5) == ids(5)
    assert ids(5) != ids(6)


def test_prompt_over_the_cap_is_an_error_for_its_nodes_not_a_truncation(tiny_model, tiny_tokenizer, messages):
    backend = HFBackend(tiny_model, tiny_tokenizer)
    long, short = messages("Predict the target. " * 40), messages("hi")
    cap = len(prompt_token_ids(tiny_tokenizer, long)) - 1
    out = backend.generate([GenRequest(long, 2), GenRequest(short, 1)],
                           SamplingConfig(max_new_tokens=5, prompt_cap=cap))
    assert all(c.error and "PromptTooLongError" in c.error and not c.response_token_ids for c in out[0])
    assert out[1][0].error is None and out[1][0].response_token_ids


def test_total_cap_shrinks_the_response_budget():
    plan = plan_prompt(list(range(90)), SamplingConfig(max_new_tokens=50, total_cap=100))
    assert plan.max_new_tokens == 10 and plan.error is None
    assert plan_prompt(list(range(100)), SamplingConfig(max_new_tokens=50, total_cap=100)).error
    assert plan_prompt(list(range(10)), SamplingConfig(max_new_tokens=50)).max_new_tokens == 50


def test_thinking_is_split_from_the_answer():
    assert split_thinking("<think>plan it</think>\n```python\nx\n```") == ("plan it", "```python\nx\n```")
    assert split_thinking("no thinking") == (None, "no thinking")


def test_a_model_left_in_train_mode_with_checkpointing_samples_as_in_eval(tiny_model, tiny_tokenizer, messages):
    greedy = SamplingConfig(max_new_tokens=12, temperature=0.0)
    request = [GenRequest(messages("Write a first solution."), 1)]
    expected = HFBackend(tiny_model, tiny_tokenizer).generate(request, greedy)[0][0].response_token_ids
    attentions = [layer.self_attn for layer in tiny_model.model.layers]
    for attn in attentions:
        attn.attention_dropout = 0.9  # in train mode this would scramble every step
    tiny_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    tiny_model.train()
    try:
        got = HFBackend(tiny_model, tiny_tokenizer).generate(request, greedy)[0][0].response_token_ids
        assert got == expected and tiny_model.training  # mode restored for the learner
    finally:
        for attn in attentions:
            attn.attention_dropout = 0.0
        tiny_model.gradient_checkpointing_disable()
        tiny_model.eval()
