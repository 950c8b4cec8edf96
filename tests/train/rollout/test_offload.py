"""The memory choreography of `--set policy_offload=host` (train.policy.offload), on CPU with the
tiny policy: while the engine generates the policy's frozen base is off the device; the step
gets it back bit for bit; the merged sync reads it from the host copy; and the engine's weights
equal the trainer's (LoRA merged in) after every offload, sync and resume -- the same weights a
run without the offload gives its engine."""
from __future__ import annotations

import pytest

from tests.train.test_run import TASK, CannedBackend, model_dir  # noqa: F401 - shared fixture
from train.generate.base import Capabilities
from warehouse.errors import TerminalError


def _base(model) -> dict:
    return {name: p.detach().clone() for name, p in model.named_parameters() if not p.requires_grad}


def test_offload_frees_the_base_and_restores_it_bit_for_bit(tiny_model):
    import copy

    import torch

    from train.generate.vllm_backend import merged_weights
    from train.policy.offload import BaseOffload, offload_of
    from train.policy.loader import wrap_lora

    model = wrap_lora(copy.deepcopy(tiny_model), 4, 4, seed=0)
    with torch.no_grad():  # a trained adapter: the merged weights differ from the base
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.1)
    before, merged_before = _base(model), {k: v.clone() for k, v in merged_weights(model)}
    trainable = {name: p for name, p in model.named_parameters() if p.requires_grad}
    offload = BaseOffload(model)
    assert offload_of(model) is offload
    freed = offload.offload()
    assert freed == sum(v.numel() * v.element_size() for v in before.values()) == offload.host_bytes
    assert all(p.numel() == 0 for name, p in model.named_parameters() if name in before)
    assert all(p.numel() > 0 for p in trainable.values())  # the adapter stays
    assert offload.offload() == 0  # already off: nothing to do
    merged_off = dict(merged_weights(model))  # read from the host copy
    assert merged_off.keys() == merged_before.keys()
    assert all(torch.equal(merged_off[k], merged_before[k]) for k in merged_before)
    assert offload.restore() == freed
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters() if name in before)
    assert offload.restore() == 0


class EngineBackend(CannedBackend):
    """A canned backend with weights of its own, loaded by the merged sync like vLLM's: it keeps
    a copy of every tensor it is given, and records whether the policy's base was off the device
    whenever it generated."""

    capabilities = Capabilities(logprobs=True, weight_load=True, own_weights=True)

    def __init__(self, tokenizer, policy, log: list):
        super().__init__(tokenizer)
        self.policy, self.log = policy, log
        self.weights: dict = {}

    def generate(self, requests, sampling):
        from tests.train.test_run import BAD, GOOD
        from train.generate.base import completion_from_tokens, plan_prompts

        frozen = [p for p in self.policy.model.parameters() if not p.requires_grad]
        self.log.append(("gen", all(p.numel() == 0 for p in frozen)))
        # the valid and the crashing sibling answer with different tokens: with the same tokens
        # their opposite advantages cancel in the gradient and no step would move the weights
        out = []
        for request, plan in zip(requests, plan_prompts(self.tokenizer, requests, sampling)):
            out.append([])
            for i in range(request.n):
                ids = [1, 2, 3] if i % 2 == 0 else [4, 5, 6]
                c = completion_from_tokens(self.tokenizer, request.messages, plan.token_ids, ids, [-0.5] * 3)
                c.raw_completion = f"Plan.\n\n```python\n{GOOD if i % 2 == 0 else BAD}\n```"
                out[-1].append(c)
        return out

    def load_weights(self, model) -> None:
        from train.generate.vllm_backend import merged_weights

        self.weights = {name: t.detach().clone() for name, t in merged_weights(model)}
        self.log.append(("load", dict(self.weights)))


def _run(db_url, model_dir, tmp_path, monkeypatch, offload: str, run_id: str, resume: str | None = None):
    import train.generate.choice
    import train.run
    from train.settings import RunOptions

    log, engines = [], []

    def make_backend(opts, arm, knobs, policy):
        engines.append(EngineBackend(policy.tokenizer, policy, log))
        return engines[-1]

    monkeypatch.setattr("train.factories.make_backend", make_backend)
    real = train.generate.choice.backend_class
    monkeypatch.setattr(train.generate.choice, "backend_class",
                        lambda name: EngineBackend if name == "hf" else real(name))
    opts = RunOptions(model=str(model_dir), rounds=2, tasks=(TASK,), db_url=db_url, learn=True,
                      checkpoint_root=str(tmp_path / "ckpt"), run_id=run_id, health_gate=False, resume_from=resume,
                      sets={"siblings_per_expansion": "2", "policy_offload": offload, "learning_rate": "0.05"})
    train.run.run(opts, log=lambda line: None)
    return log, engines[-1]


def _equal(a: dict, b: dict) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_engine_and_trainer_weights_agree_after_every_offload_sync_and_resume(db_url, model_dir, tmp_path,
                                                                              monkeypatch):
    from train.generate.vllm_backend import merged_weights
    from train.policy.offload import offload_of

    plain, _ = _run(db_url, model_dir, tmp_path / "plain", monkeypatch, "off", "plain")
    hosted, engine = _run(db_url, model_dir, tmp_path / "host", monkeypatch, "host", "host")
    assert [event for event, _ in hosted] == ["gen", "load", "gen", "load"]
    assert all(off for event, off in hosted if event == "gen")  # the base was off while generating
    assert not any(off for event, off in plain if event == "gen")
    loads = [w for event, w in hosted if event == "load"]
    assert all(_equal(a, b) for a, b in zip(loads, [w for event, w in plain if event == "load"]))
    assert not _equal(loads[0], loads[1])  # the steps moved the weights the engine got
    # the trainer's own weights, base restored, are what the engine holds after the last sync
    offload = offload_of(engine.policy.model)
    assert offload.offloaded
    offload.restore()
    assert _equal(dict((k, v.detach().clone()) for k, v in merged_weights(engine.policy.model)), engine.weights)
    # a resumed run: the engine gets the checkpoint's weights (from the host copy) before round 3
    resumed, _ = _run(db_url, model_dir, tmp_path / "host", monkeypatch, "host", "resumed", resume="host:2")
    assert [event for event, _ in resumed][:2] == ["load", "gen"]
    assert _equal(resumed[0][1], loads[-1])


def test_offload_needs_an_engine_with_weights_of_its_own(db_url, model_dir):
    import train.run
    from train.settings import RunOptions

    opts = RunOptions(model=str(model_dir), rounds=1, tasks=(TASK,), db_url=db_url, learn=True, health_gate=False,
                      backend="hf", sets={"policy_offload": "host"})
    with pytest.raises(TerminalError, match="policy_offload=host: the hf backend generates with the policy's own"):
        train.run.run(opts, log=lambda line: None)
    with pytest.raises(TerminalError, match="policy_offload=disk: use off or host"):
        train.run.run(RunOptions(**{**opts.__dict__, "sets": {"policy_offload": "disk"}}), log=lambda line: None)
