"""The paged KV cache with continuous batching, on the tiny policy (fp32, CPU, LoRA-wrapped):
the same tokens as the plain (unpaged) path, the same completions under preemption, and a clear error
when one row cannot fit."""
from __future__ import annotations

import pytest
import torch

from train.generate.base import GenRequest, SamplingConfig
from train.generate.hf import HFBackend
from train.generate.paged import BLOCK_SIZE, KVBudgetError, PagedGenerator


@pytest.fixture(scope="module")
def policy():
    from train.policy.loader import load_policy
    from train.tiny.policy import resolve_model_path

    return load_policy(resolve_model_path("tiny", log=lambda _: None), "cpu", lora=(8, 16))


def _requests(messages):
    texts = ["Write a first solution.", "# Task\nPredict the target. " * 6, "hi", "```python\nprint(1)\n```"]
    return [GenRequest(messages(t), n) for t, n in zip(texts, (3, 2, 1, 2))]


def _tokens(out):
    return [[c.response_token_ids for c in group] for group in out]


@pytest.mark.parametrize("lookahead", [1, 5])  # a host sync every step / every 5 decode steps
def test_paged_path_yields_the_plain_paths_tokens_and_logprobs(policy, messages, lookahead):
    sampling = SamplingConfig(max_new_tokens=24, seed=7)
    requests = _requests(messages)
    plain = HFBackend(policy.model, policy.tokenizer, paged=False).generate(requests, sampling)
    paged = HFBackend(policy.model, policy.tokenizer, max_running=3, lookahead=lookahead).generate(requests, sampling)
    assert _tokens(paged) == _tokens(plain)
    for group_p, group_s in zip(paged, plain):
        for p, s in zip(group_p, group_s):
            assert p.response_logprobs == pytest.approx(s.response_logprobs, abs=1e-4)
    assert len({tuple(c.response_token_ids) for c in paged[0]}) > 1  # siblings differ


def test_a_rows_tokens_do_not_depend_on_the_rows_beside_it(policy, messages):
    sampling = SamplingConfig(max_new_tokens=16, seed=3)
    backend = HFBackend(policy.model, policy.tokenizer)
    together = backend.generate(_requests(messages), sampling)
    first = backend.generate(_requests(messages)[:1], sampling)
    assert _tokens(first)[0] == _tokens(together)[0]


@pytest.mark.parametrize("paged", [True, False], ids=["paged", "plain"])
def test_a_share_of_a_calls_requests_yields_their_completions_in_the_whole_call(policy, messages, paged):
    # a torchrun rank generates a share of each call (train.generate.ranks); request 1's prompt
    # is over the cap: its nodes fail and take no noise index, on every rank
    from train.policy.chat import prompt_token_ids

    requests = _requests(messages)
    cap = len(prompt_token_ids(policy.tokenizer, requests[1].messages)) - 1
    # hot sampling: the tiny policy is confident enough that two noise draws at T = 1 can give the
    # same tokens, which would make the last check below pass or fail by the build's luck
    sampling = SamplingConfig(max_new_tokens=16, seed=5, prompt_cap=cap, temperature=3.0)
    backend = HFBackend(policy.model, policy.tokenizer, paged=paged)
    whole = backend.generate(requests, sampling)
    assert whole[1][0].error and all(c.error is None for i in (0, 2, 3) for c in whole[i])
    shares = {(3, 1): backend.generate(requests, sampling, indices=[3, 1]),
              (0, 2): backend.generate(requests, sampling, indices=[0, 2])}
    for indices, share in shares.items():
        assert _tokens(share) == _tokens([whole[i] for i in indices])
        for got, i in zip(share, indices):
            assert [c.response_logprobs for c in got] == [pytest.approx(c.response_logprobs, abs=1e-4) for c in whole[i]]
            assert [c.error for c in got] == [c.error for c in whole[i]]
    # the noise index is what makes it so: request 3 alone, its rows numbered from 0, differs
    assert _tokens(backend.generate(requests[3:], sampling)) != _tokens([whole[3]])


@pytest.mark.parametrize("lookahead", [1, 6])
def test_preemption_and_recompute_yield_the_unconstrained_completions(policy, messages, lookahead):
    sampling = SamplingConfig(max_new_tokens=40, seed=11)
    requests = _requests(messages)
    free = HFBackend(policy.model, policy.tokenizer).generate(requests, sampling)
    longest = max(len(c.prompt_token_ids) + 40 for group in free for c in group)
    tight = HFBackend(policy.model, policy.tokenizer, kv_blocks=-(-longest // BLOCK_SIZE) + 2, lookahead=lookahead)
    out = tight.generate(requests, sampling)
    assert tight.last_generator.preemptions > 0
    assert _tokens(out) == _tokens(free)
    for group_o, group_f in zip(out, free):
        for o, f in zip(group_o, group_f):
            assert o.response_logprobs == pytest.approx(f.response_logprobs, abs=1e-4)


def _rows(policy, messages):
    from train.policy.chat import prompt_token_ids

    prompt = prompt_token_ids(policy.tokenizer, messages("Write a first solution."))
    return [prompt] * 6


def test_a_budget_smaller_than_one_rows_cap_still_finishes(policy, messages):
    prompts = _rows(policy, messages)
    cap, prompt_blocks = 5000, -(-len(prompts[0]) // BLOCK_SIZE)
    full = prompt_blocks * len(prompts) + len(prompts) * (-(-cap // BLOCK_SIZE))
    # EOS ids taken from an unconstrained run: row i ends by its token 20 + 3 i at the latest
    long = PagedGenerator(policy.model, [], num_blocks=full).generate(prompts, [60] * len(prompts),
                                                                       SamplingConfig(60, seed=5))
    eos = sorted({tokens[20 + 3 * i] for i, (tokens, _) in enumerate(long)})
    sampling = SamplingConfig(max_new_tokens=cap, seed=5)
    small = PagedGenerator(policy.model, eos, num_blocks=prompt_blocks + 3, lookahead=3)  # 32 slots beyond the prompt
    assert small.pool.num_blocks * BLOCK_SIZE < len(prompts[0]) + cap
    got = small.generate(prompts, [cap] * len(prompts), sampling)
    want = PagedGenerator(policy.model, eos, num_blocks=full).generate(prompts, [cap] * len(prompts), sampling)
    assert [tokens for tokens, _ in got] == [tokens for tokens, _ in want]
    assert all(tokens[-1] in eos for tokens, _ in got)
    assert small.preemptions > 0


def test_a_row_that_cannot_fit_the_whole_pool_is_a_clear_error(policy, messages):
    prompts = _rows(policy, messages)[:2]
    generator = PagedGenerator(policy.model, [], num_blocks=-(-len(prompts[0]) // BLOCK_SIZE) + 1)
    with pytest.raises(KVBudgetError, match="gpu_memory_utilization"):
        generator.generate(prompts, [200, 200], SamplingConfig(max_new_tokens=200, seed=0))


def test_greedy_paged_matches_plain_forwards(policy, messages):
    """Greedy tokens equal an argmax over uncached forwards of prompt + tokens so far."""
    from train.policy.chat import prompt_token_ids

    request = GenRequest(messages("# Task\nPredict"), 1)
    out = HFBackend(policy.model, policy.tokenizer).generate([request], SamplingConfig(12, temperature=0.0))[0][0]
    ids = prompt_token_ids(policy.tokenizer, request.messages)
    with torch.no_grad():
        for token in out.response_token_ids:
            assert policy.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax().item() == token
            ids = ids + [token]


def test_each_request_is_reported_as_soon_as_its_rows_end_with_the_returned_completions(policy, messages):
    # train.rollout.round executes a reported group while the call goes on (overlap_exec)
    sampling = SamplingConfig(max_new_tokens=20, seed=11)
    requests = _requests(messages)
    backend = HFBackend(policy.model, policy.tokenizer, max_running=3)
    reported = {}
    out = backend.generate(requests, sampling, on_request=lambda i, group: reported.setdefault(i, group))
    assert sorted(reported) == [0, 1, 2, 3]
    assert [reported[i] for i in range(4)] == out  # the very objects returned
    assert _tokens(out) == _tokens(HFBackend(policy.model, policy.tokenizer).generate(requests, sampling))


def test_the_triton_decode_kernel_is_used_only_for_head_sizes_it_compiles():
    """tl.dot needs an inner size of at least 16 and tl.arange a power of two: the tests' tiny
    models (head size 8) decode through the gather on a GPU too, instead of failing to compile."""
    from train.generate.paged_kernel import supports

    assert [d for d in (8, 16, 32, 64, 80, 96, 128, 256) if supports(d)] == [16, 32, 64, 128, 256]
