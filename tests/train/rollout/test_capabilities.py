"""What a backend declares in `capabilities` (train.generate.base.Capabilities) is what it does,
and callers go by the declaration: the round streams only from a backend that declares it, the
loop serves adapters only to one that swaps them, and deals calls only to one that takes shares."""
from __future__ import annotations

import types

import pytest

from train.generate.base import Capabilities, Completion, GenRequest, SamplingConfig
from warehouse.errors import TerminalError


def _requests(messages, n=2):
    return [GenRequest(messages(text), n) for text in ("Write a first solution.", "# Task\nPredict the target.",
                                                     "You are an expert.")]


def _tokens(batches):
    return [[c.response_token_ids for c in batch] for batch in batches]


def _logprobs(batches):  # a row's numbers shift in the last digits with the rows beside it
    return [[pytest.approx(c.response_logprobs, abs=1e-4) for c in batch] for batch in batches]


@pytest.mark.parametrize("paged", [True, False])
def test_the_hf_backend_does_what_it_declares(tiny_model, tiny_tokenizer, messages, paged):
    from train.generate.hf import HFBackend

    backend = HFBackend(tiny_model, tiny_tokenizer, paged=paged)
    caps = backend.capabilities
    assert (caps.adapter_swap, caps.logprobs, caps.streaming, caps.ranks) == (False, True, paged, True)
    assert not hasattr(backend, "set_adapter")  # no adapter swap: it samples from the trained module
    requests, sampling = _requests(messages), SamplingConfig(max_new_tokens=6, seed=3)
    handed = {}
    whole = backend.generate(requests, sampling, on_request=lambda i, completions: handed.setdefault(i, completions))
    for batch in whole:  # logprobs: one per response token
        assert all(c.response_token_ids and len(c.response_logprobs) == len(c.response_token_ids) for c in batch)
    if caps.streaming:  # every request handed out, with what the call returns
        assert sorted(handed) == [0, 1, 2] and [handed[i] for i in range(3)] == whole
    else:
        assert handed == {}
    share = backend.generate(requests, sampling, indices=[2, 0])  # ranks: a share yields the whole call's rows
    assert _tokens(share) == _tokens([whole[2], whole[0]])
    assert [[c.response_logprobs for c in batch] for batch in share] == _logprobs([whole[2], whole[0]])


def test_every_backend_declares_its_capabilities():
    from train.generate.ranks import DealtBackend

    # VLLMBackend's depend on its weight sync: tests/train/rollout/test_records.py
    inner = types.SimpleNamespace(capabilities=Capabilities(logprobs=True, streaming=True, ranks=True))
    assert DealtBackend(types.SimpleNamespace(), inner).capabilities == Capabilities(logprobs=True)


class SilentBackend:
    """Takes `on_request` but declares no streaming: the round must not rely on it."""

    capabilities = Capabilities(logprobs=True)

    def __init__(self):
        self.keywords = []

    def generate(self, requests, sampling, on_request=None):
        self.keywords.append(on_request)
        return [[Completion(r.messages, "```python\nprint(1)\n```", None, [1], [-0.1]) for _ in range(r.n)]
                for r in requests]


def test_the_round_streams_only_from_a_backend_that_declares_it(monkeypatch):
    import train.env
    from train.rollout.round import RoundContext, run_round
    from train.rollout.tree import SearchSettings, TaskTree

    monkeypatch.setattr(train.env, "evaluate", lambda task, completions, executor=None, limits=None: [
        {"code": c, "plan": "", "status": "ok", "exc_type": None, "reward": 0.5, "test_metric": 1.0,
         "oriented": 1.0} for c in completions])
    backend = SilentBackend()
    ctx = RoundContext(tasks={"a": types.SimpleNamespace(description="# a")}, backend=backend,
                       sampling=SamplingConfig(max_new_tokens=8),
                       settings=SearchSettings(siblings=2, expansions_per_round=2, draft_prob=0.0),
                       run_seed=0, run_id="r", model_name="m", overlap_exec=True)
    result = run_round(1, {"a": TaskTree("a")}, ctx)
    assert backend.keywords == [None, None] and len(result.records["a"]) == 4


def test_several_ranks_need_a_backend_that_generates_a_share():
    from train.factories import deal_over_ranks
    from train.generate.ranks import DealtBackend

    team = types.SimpleNamespace(size=2, main=True)
    whole_calls_only = types.SimpleNamespace(capabilities=Capabilities(logprobs=True))
    with pytest.raises(TerminalError, match="cannot generate a share of a call.*2 ranks"):
        deal_over_ranks(whole_calls_only, team)
    shares = types.SimpleNamespace(capabilities=Capabilities(ranks=True))
    assert isinstance(deal_over_ranks(shares, team), DealtBackend)
    assert deal_over_ranks(whole_calls_only, types.SimpleNamespace(size=1, main=True)) is whole_calls_only


@pytest.mark.parametrize("swaps", [True, False])
def test_update_weights_serves_the_adapter_only_to_a_backend_that_swaps_adapters(tmp_path, swaps):
    from train.settings import RunOptions
    from train.weight_sync import update_weights

    saved, served = [], []
    backend = types.SimpleNamespace(capabilities=Capabilities(adapter_swap=swaps),
                                    set_adapter=lambda path: served.append(path) or 7)
    model = types.SimpleNamespace(save_pretrained=lambda root, **kw: saved.append(root))
    learner = types.SimpleNamespace(policy=types.SimpleNamespace(model=model))
    update_weights(backend, learner, RunOptions(checkpoint_root=str(tmp_path)), "r", 3)
    expected = [tmp_path / "r" / "served_adapter_3"] if swaps else []
    assert saved == expected and served == [str(p) for p in expected]
