"""run_round: batched generation over tasks, per-expansion order, reproducibility from the seed."""
from __future__ import annotations

import types

import pytest

from train.generate.base import Capabilities, Completion, SamplingConfig
from train.rollout.round import RoundContext, run_round
from train.rollout.tree import SearchSettings, TaskTree


class Backend:
    capabilities = Capabilities(logprobs=True)

    def __init__(self):
        self.calls = []

    def generate(self, requests, sampling):
        self.calls.append((len(requests), sampling.seed))
        return [[Completion(r.messages, f"```python\nprint({i})\n```", None, [1] * (i + 1), [-0.1] * (i + 1))
                 for i in range(r.n)] for r in requests]


@pytest.fixture
def fake_env(monkeypatch):
    import train.env

    def evaluate(task, completions, executor=None, limits=None):
        return [{"code": c, "plan": "", "status": "ok" if i % 2 == 0 else "crashed", "exc_type": None,
                 "reward": 0.1 * i if i % 2 == 0 else -0.5, "test_metric": float(i) if i % 2 == 0 else None,
                 "oriented": float(i) if i % 2 == 0 else None} for i, c in enumerate(completions)]

    monkeypatch.setattr(train.env, "evaluate", evaluate)


def _ctx(seed: int, backend=None, expansions: int = 2) -> RoundContext:
    tasks = {name: types.SimpleNamespace(description=f"# {name}") for name in ("a", "b", "c")}
    return RoundContext(tasks=tasks, backend=backend or Backend(), sampling=SamplingConfig(max_new_tokens=8),
                        settings=SearchSettings(siblings=4, expansions_per_round=expansions, draft_prob=0.0),
                        run_seed=seed, run_id="r", model_name="m")


def _run(seed: int, rounds: int = 2, backend=None):
    trees = {t: TaskTree(t) for t in "abc"}
    ctx = _ctx(seed, backend)
    return [run_round(rnd, trees, ctx) for rnd in range(1, rounds + 1)]


def test_one_generate_call_per_expansion_index_covering_every_task(fake_env):
    backend = Backend()
    _run(0, rounds=1, backend=backend)
    assert [n for n, _ in backend.calls] == [3, 3]
    assert backend.calls[0][1] != backend.calls[1][1]  # each call has its own sampling seed


def test_second_expansion_expands_a_node_of_the_first(fake_env):
    result = _run(0, rounds=1)[0]
    recs = result.records["a"]
    first_ids = {r["id"] for r in recs[:4]}
    assert [r["mode"] for r in recs] == ["draft"] * 4 + [recs[4]["mode"]] * 4
    assert recs[4]["mode"] in ("improve", "debug") and recs[4]["parent_id"] in first_ids
    summary = result.summaries["a"]
    assert summary["nodes"] == 8 and summary["valid"] == 4 and summary["expansions"] == 2


def test_same_seed_same_tree_other_seed_other_tree(fake_env):
    ids = lambda seed: [r["id"] for res in _run(seed) for recs in res.records.values() for r in recs]  # noqa: E731
    assert ids(1) == ids(1)
    assert set(ids(1)).isdisjoint(ids(2))


def test_llm_seconds_are_shared_by_tokens_and_sum_to_the_call(fake_env):
    result = _run(0, rounds=1)[0]
    total = sum(s["gen_llm_seconds"] for s in result.summaries.values())
    assert total == pytest.approx(result.gen_seconds, abs=0.01)


class StreamingBackend(Backend):
    """Reports request 0 mid-call, then waits (up to 10 s) until its group has started executing."""

    capabilities = Capabilities(logprobs=True, streaming=True)

    def __init__(self, started):
        super().__init__()
        self.started, self.saw_overlap = started, []

    def generate(self, requests, sampling, on_request=None):
        out = super().generate(requests, sampling)
        if on_request is not None:
            self.started.clear()  # set by the groups the previous call left to run after it
            on_request(0, out[0])
            self.saw_overlap.append(self.started.wait(10))
        return out


def test_overlapped_execution_starts_mid_call_and_gives_the_same_round(fake_env, monkeypatch):
    import threading

    import train.env

    started, evaluate = threading.Event(), train.env.evaluate

    def evaluate_and_say(task, completions, executor=None, limits=None):
        started.set()
        return evaluate(task, completions, executor, limits)

    monkeypatch.setattr(train.env, "evaluate", evaluate_and_say)
    plain = _run(3)
    backend = StreamingBackend(started)
    trees = {t: TaskTree(t) for t in "abc"}
    ctx = _ctx(3, backend)
    ctx.overlap_exec = True
    overlapped = [run_round(rnd, trees, ctx) for rnd in (1, 2)]
    assert backend.saw_overlap == [True] * 4  # 2 rounds x 2 expansions: group 0 ran during the call
    assert [r.records for r in overlapped] == [r.records for r in plain]
    assert all(r.exec_overlap_seconds > 0 for r in overlapped)
    assert [r.exec_overlap_seconds for r in plain] == [0.0, 0.0]
