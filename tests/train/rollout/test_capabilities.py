"""What a backend declares in `capabilities` (train.generate.base.Capabilities) is what it does,
and callers go by the declaration: the round streams only from a backend that declares it, the
loop serves adapters only to one that swaps them, deals calls only to one that takes shares,
loads a resumed run's weights only into one with weights of its own, and gives FSDP ranks a
generation copy only for one without (decided from the chosen class, before the backend exists)."""
from __future__ import annotations

import types

import pytest

from tests.train.test_run import TASK, CannedBackend, model_dir  # noqa: F401 - shared fixture
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
    assert not caps.own_weights and not caps.weight_load  # it samples from the trained module itself
    assert backend.notes == [] and backend.device == tiny_model.device
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
    dealt = DealtBackend(types.SimpleNamespace(), inner)
    assert dealt.capabilities == Capabilities(logprobs=True)
    assert dealt.notes == [] and dealt.device is None  # each rank generates on its own device


@pytest.mark.parametrize("paged", [True, False])
def test_a_backend_class_declares_what_each_of_its_instances_supports(tiny_model, tiny_tokenizer, paged):
    """The class-level declaration answers before the backend exists; an instance only adds to it."""
    from train.generate.choice import backend_class
    from train.generate.hf import HFBackend
    from train.generate.vllm_backend import VLLMBackend

    assert (backend_class("hf"), backend_class("vllm")) == (HFBackend, VLLMBackend)
    assert (HFBackend.capabilities.own_weights, VLLMBackend.capabilities.own_weights) == (False, True)
    with pytest.raises(ValueError, match="'auto'"):
        backend_class("auto")  # resolved by choose_backend first
    declared = vars(HFBackend.capabilities)
    instance = vars(HFBackend(tiny_model, tiny_tokenizer, paged=paged).capabilities)
    assert {name for name, on in declared.items() if on} <= {name for name, on in instance.items() if on}


@pytest.mark.parametrize("backend, copied", [("hf", True), ("vllm", False)])
def test_fsdp_ranks_get_a_generation_copy_only_for_a_backend_without_weights_of_its_own(tiny_model, backend,
                                                                                       copied):
    import torch

    from train.policy.loader import Policy
    from train.settings import RunOptions
    from train.weight_sync import generation_copy

    policy = Policy(model=tiny_model, tokenizer=None, path=None, device=torch.device("cpu"))
    generator = generation_copy(policy, RunOptions(backend=backend))
    assert (generator.model is not tiny_model) == copied
    first = next(tiny_model.parameters())
    assert torch.equal(next(generator.model.parameters()), first)


class OwnWeightsBackend(CannedBackend):
    """A canned backend that loads merged weights; with `own` it declares weights of its own."""

    def __init__(self, tokenizer, own: bool, events: list):
        super().__init__(tokenizer)
        self.capabilities = Capabilities(logprobs=True, weight_load=True, own_weights=own)
        self.events = events

    def generate(self, requests, sampling):
        self.events.append("gen")
        return super().generate(requests, sampling)

    def load_weights(self, model) -> None:
        self.events.append("load")


@pytest.mark.parametrize("own", [True, False])
def test_a_resumed_run_loads_its_weights_into_a_backend_with_weights_of_its_own(db_url, model_dir, monkeypatch,
                                                                                 tmp_path, own):
    """Only a backend that loaded the base model itself must be given the resumed adapter's
    weights before round 1; one sharing the trained module sees them already."""
    import train.run
    from train.settings import RunOptions

    events = []
    monkeypatch.setattr("train.factories.make_backend",
                        lambda opts, arm, knobs, policy: OwnWeightsBackend(policy.tokenizer, own, events))
    opts = RunOptions(model=str(model_dir), rounds=1, tasks=(TASK,), db_url=db_url, learn=True,
                      checkpoint_root=str(tmp_path / "ckpt"), sets={"siblings_per_expansion": "2"},
                      run_id="first", health_gate=False)
    train.run.run(opts, log=lambda line: None)
    assert events[-2:] == ["gen", "load"]  # the step's update_weights
    events.clear()
    train.run.run(RunOptions(**{**opts.__dict__, "run_id": "resumed", "resume_from": "first:1"}), log=lambda line: None)
    assert events == (["load"] if own else []) + ["gen", "load"]
    from warehouse.db import connect

    with connect(db_url, read_only=True) as con:  # the weights of each node: the base, then step 1 resumed
        versions = con.execute('SELECT "run_id", "round", list(DISTINCT "policy_version") FROM "nodes" '
                               'GROUP BY ALL ORDER BY 1').fetchall()
    assert versions == [("first", 1, [0]), ("resumed", 2, [1])]


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
