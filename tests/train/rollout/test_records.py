"""Node records and summaries (schema C), prompt-cap errors, and the vLLM backend's API use."""
from __future__ import annotations

import json
import sys
import types

from train.generate.base import Capabilities, Completion, GenRequest, SamplingConfig
from train.rollout.records import node_records, prompt_error_record, task_round_summary
from warehouse.tree_rules import best_node
from train.rollout.render import render_tree
from train.rollout.tree import SearchSettings, TaskTree, plan_expansion


def _env(status: str, reward: float, oriented: float | None = None) -> dict:
    return {"code": "x", "plan": "", "status": status, "exc_type": None, "reward": reward, "test_metric": oriented,
            "oriented": oriented, "source": "grade" if oriented is not None else None, "humanrank": reward}


def _improve_expansion():
    tree = TaskTree("t")
    tree.add([{"id": "aaaaaaaaaaaa", "status": "ok", "reward": 0.4, "code": "y", "depth": 0, "oriented": 0.7,
               "test_metric": 0.7}])
    return plan_expansion(tree, "# t", 2, 0, SearchSettings(draft_prob=0.0), run_seed=0)


def test_records_carry_search_generation_and_parent_evidence():
    exp = _improve_expansion()
    comps = [Completion(exp.messages, "a", None, [1, 2], [-0.1, -0.2], [9, 9]) for _ in range(3)]
    recs = node_records(exp, comps, [_env("ok", 0.5, 0.8), _env("ok", 0.9, 0.9), _env("crashed", -0.5)])
    assert [r["group_best"] for r in recs] == [False, True, False]
    assert {r["parent_id"] for r in recs} == {"aaaaaaaaaaaa"} and {r["depth"] for r in recs} == {1}
    assert {r["sibling_group"] for r in recs} == {exp.sibling_group} and len({r["id"] for r in recs}) == 3
    assert recs[0]["improve_delta"] == 0.8 - 0.7 and recs[2]["improve_delta"] is None
    assert recs[0]["parent_P"] == 1.0  # the only candidate, no draft chance
    assert "humanrank" not in recs[0] and recs[0]["mode"] == "improve" and recs[0]["step"] == 0
    assert recs[0]["response_token_ids"] == [1, 2] and recs[0]["prompt_messages"] == exp.messages


def test_prompt_error_node_is_an_unexecuted_infrastructure_failure():
    exp = _improve_expansion()
    failed = Completion(exp.messages, error="PromptTooLongError: prompt has 99 tokens, over the prompt cap of 10")
    rec = node_records(exp, [failed], [prompt_error_record(failed)])[0]
    assert (rec["status"], rec["exc_type"], rec["reward"]) == ("crashed", "PromptTooLongError", -1.0)
    assert rec["response_token_ids"] == [] and rec["code"] == "" and "prompt cap of 10" in rec["term_tail"]


def test_summary_counts_and_best_node_match_the_recount():
    recs = [{"id": "b", "status": "ok", "oriented": 0.5, "test_metric": 0.5, "reward": 0.1},
            {"id": "a", "status": "ok", "oriented": 0.5, "test_metric": 0.5, "reward": 0.1},
            {"id": "c", "status": "crashed", "oriented": None, "test_metric": None, "reward": -0.5}]
    summary = task_round_summary("t", 3, recs, model="m", expansions=1, buffer_nodes=10, gen_llm_seconds=1.23456,
                                 gen_exec_seconds=2.0, rollout_file="f", workspace="w")
    assert (summary["nodes"], summary["valid"], summary["best_node_id"]) == (3, 2, "a")  # tie: smallest id
    assert summary["gen_llm_seconds"] == 1.235 and summary["round"] == 3
    assert best_node(recs[2:]) is None


def test_tree_render_lists_every_node_and_the_best():
    exp = _improve_expansion()
    comps = [Completion(exp.messages, "a") for _ in range(2)]
    recs = node_records(exp, comps, [_env("ok", 0.5, 0.8), _env("crashed", -0.5)])
    text = render_tree(recs)
    assert text.count("improve") == 2 and f"best={recs[0]['id']}" in text and "nodes=2 sibling_groups=1" in text


def _fake_vllm(monkeypatch, finish_order=None):
    """A stand-in for the vllm package recording how it is called (the real one runs in its own
    venv: test_vllm_cpu.py): requests are queued by `enqueue` and end one per engine step, in
    `finish_order` (default: queue order), as vLLM's engine hands finished requests out."""
    made = {"calls": []}

    class Engine:
        def __init__(self):
            self.queue, self.added = [], []

        def add_request(self, rid, prompt, params, lora_request=None):
            made.setdefault("generate", ([], [], lora_request))
            made["generate"][0].append(prompt)
            made["generate"][1].append(params)
            self.added.append((rid, params))
            if len(self.added) == made["expected"]:  # the call's last request: the engine runs
                order = finish_order or range(len(self.added))
                self.queue = [self.added[k] for k in order]
                self.added = []

        def has_unfinished_requests(self):
            return bool(self.queue)

        def step(self):
            if not self.queue:
                return []
            rid, params = self.queue.pop(0)
            sample = types.SimpleNamespace(token_ids=[5, 7], logprobs=[{5: types.SimpleNamespace(logprob=-0.25)},
                                                                       {7: types.SimpleNamespace(logprob=-1.5)}])
            made["calls"].append(("step", rid))
            return [types.SimpleNamespace(request_id=rid, finished=True, outputs=[sample] * params.n)]

        def abort_request(self, ids, internal=False):
            made["aborted"] = list(ids)

    class LLM:
        def __init__(self, **kwargs):
            made["llm"] = kwargs
            self.llm_engine = Engine()

        def collective_rpc(self, method, kwargs=None):
            made["calls"].append((method, list(kwargs["weights_iterator"])))

        def reset_prefix_cache(self):
            made["calls"].append(("reset_prefix_cache",))

    class SamplingParams:
        def __init__(self, **kwargs):
            self.__dict__.update(kwargs)

    class LoRARequest:
        def __init__(self, name, adapter_id, path):
            self.lora_name, self.lora_int_id, self.lora_path = name, adapter_id, path

    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams = LLM, SamplingParams
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.RequestOutputKind = types.SimpleNamespace(FINAL_ONLY="final_only")
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest
    for name, module in (("vllm", vllm), ("vllm.lora", lora), ("vllm.lora.request", request),
                         ("vllm.sampling_params", sampling)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    return made


def test_vllm_backend_uses_rank_32_lora_fresh_ids_and_returns_logprobs(monkeypatch, tiny_tokenizer, messages):
    from train.generate.vllm_backend import VLLMBackend

    made = _fake_vllm(monkeypatch)
    backend = VLLMBackend("/models/x", tiny_tokenizer, gpu_memory_utilization=0.6, max_model_len=36864,
                          tensor_parallel_size=2, weight_sync="lora")
    assert made["llm"]["enable_lora"] is True and made["llm"]["max_lora_rank"] == 32
    assert made["llm"]["tensor_parallel_size"] == 2
    assert backend.capabilities == Capabilities(adapter_swap=True, logprobs=True, streaming=True, own_weights=True)
    first, second = backend.set_adapter("/ckpt/1"), backend.set_adapter("/ckpt/2")
    assert second > first and backend.lora_request.lora_int_id == second
    made["expected"] = 1
    out = backend.generate([GenRequest(messages("hi"), 3)], SamplingConfig(max_new_tokens=9, total_cap=36864))
    params = made["generate"][1][0]
    assert params.output_kind == "final_only"  # only finished outputs come back
    assert params.n == 3 and params.max_tokens == 9 and params.logprobs == 0 and params.top_k == -1
    assert params.detokenize is False  # ids only: the backend decodes once itself
    assert [c.response_logprobs for c in out[0]] == [[-0.25, -1.5]] * 3
    assert made["generate"][2] is backend.lora_request


def test_vllm_backend_hands_each_group_out_as_it_ends_and_returns_them_in_order(monkeypatch, tiny_tokenizer,
                                                                               messages):
    from train.generate.vllm_backend import VLLMBackend

    made = _fake_vllm(monkeypatch, finish_order=[2, 0, 1])
    backend = VLLMBackend("/models/x", tiny_tokenizer, max_model_len=36864)
    seen = []
    requests = [GenRequest(messages(text), n) for text, n in (("a", 1), ("b", 2), ("c", 3))]
    made["expected"] = 3
    out = backend.generate(requests, SamplingConfig(max_new_tokens=9, total_cap=36864),
                           on_request=lambda i, completions: seen.append((i, len(completions),
                                                                          len(made["calls"]))))
    assert [(i, n) for i, n, _ in seen] == [(2, 3), (0, 1), (1, 2)]  # as the engine ended them
    assert [steps for _, _, steps in seen] == [1, 2, 3]  # each before the next engine step
    assert [len(c) for c in out] == [1, 2, 3]  # the returned lists keep the request order
    assert made["llm"].get("enable_lora") is None and "aborted" not in made
    assert backend.capabilities == Capabilities(weight_load=True, logprobs=True, streaming=True,
                                                own_weights=True)  # merged, awake
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in __import__("os").environ  # set only while the engine starts


def test_vllm_backend_aborts_what_is_left_when_the_caller_fails(monkeypatch, tiny_tokenizer, messages):
    from train.generate.vllm_backend import VLLMBackend

    made = _fake_vllm(monkeypatch)
    backend = VLLMBackend("/models/x", tiny_tokenizer, max_model_len=36864)

    def fail(i, completions):
        raise KeyboardInterrupt

    requests = [GenRequest(messages(text), 1) for text in ("a", "b", "c")]
    made["expected"] = 3
    try:
        backend.generate(requests, SamplingConfig(max_new_tokens=9, total_cap=36864), on_request=fail)
    except KeyboardInterrupt:
        pass
    assert len(made["aborted"]) == 2  # the engine is left empty for the next call


def test_merged_weights_add_each_adapters_delta_under_the_base_names(monkeypatch, tiny_tokenizer):
    import torch
    from peft import LoraConfig, get_peft_model

    from train.generate.vllm_backend import VLLMBackend, merged_weights

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 3, bias=True)
            self.norm = torch.nn.LayerNorm(3)

    torch.manual_seed(0)
    net = Net()
    base = {k: v.clone() for k, v in net.state_dict().items()}
    model = get_peft_model(net, LoraConfig(r=2, lora_alpha=4, target_modules=["proj"]))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_()
    merged = dict(merged_weights(model))
    assert set(merged) == {"proj.weight", "proj.bias", "norm.weight", "norm.bias"}
    layer = model.base_model.model.proj
    expected = base["proj.weight"] + (layer.lora_B["default"].weight @ layer.lora_A["default"].weight) * 2.0
    assert torch.allclose(merged["proj.weight"], expected, atol=1e-6)
    assert not torch.equal(merged["proj.weight"], base["proj.weight"])
    assert torch.equal(layer.base_layer.weight, base["proj.weight"])  # the base itself is left as it was
    x = torch.randn(5, 4)
    with torch.no_grad():
        assert torch.allclose(layer(x), x @ merged["proj.weight"].T + merged["proj.bias"],
                              atol=1e-5)
    made = _fake_vllm(monkeypatch)
    backend = VLLMBackend("/models/x", tiny_tokenizer, max_model_len=36864)
    backend.load_weights(model)
    method, weights = made["calls"][0]
    assert method == "reload_weights" and dict(weights).keys() == merged.keys()
    assert made["calls"][-1] == ("reset_prefix_cache",)  # cached blocks hold the old weights' keys


def _model_dir(tmp_path, config: dict):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_vllm_length_is_the_total_cap_bounded_by_the_models_positions(tmp_path):
    from train.generate.vllm_backend import resolve_max_model_len

    model = _model_dir(tmp_path, {"model_type": "llama", "max_position_embeddings": 4096})
    length, note = resolve_max_model_len(model, 36864)  # hr24k_u6's total cap on the tiny policy
    assert length == 4096 and "4096" in note and "36864" in note
    assert resolve_max_model_len(model, 2048) == (2048, None)  # the arm's cap when it fits
    assert resolve_max_model_len(model, None) == (4096, None)
    vision = _model_dir(tmp_path, {"model_type": "qwen3_vl", "text_config": {"max_position_embeddings": 262144}})
    assert resolve_max_model_len(vision, 36864) == (36864, None)
    assert resolve_max_model_len(tmp_path / "nowhere", 36864) == (36864, None)  # vLLM then judges


def test_vllm_backend_bounds_the_engine_and_the_prompts_by_the_model(monkeypatch, tmp_path, tiny_tokenizer, messages):
    from train.generate.vllm_backend import VLLMBackend

    made = _fake_vllm(monkeypatch)
    model = _model_dir(tmp_path, {"max_position_embeddings": 40})
    backend = VLLMBackend(str(model), tiny_tokenizer, max_model_len=36864, device="cpu")
    assert made["llm"]["max_model_len"] == 40 and backend.notes and "36864" in backend.notes[0]
    assert made["llm"]["dtype"] == "float32" and made["llm"]["enforce_eager"] is True
    assert "gpu_memory_utilization" not in made["llm"]  # on CPU it would reserve RAM: a fixed KV size instead
    long_prompt = messages("word " * 60)
    made["expected"] = 1
    out = backend.generate([GenRequest(long_prompt, 2), GenRequest(messages("hi"), 1)],
                           SamplingConfig(max_new_tokens=100, total_cap=36864))
    assert [c.error is not None and "40" in c.error for c in out[0]] == [True, True]  # the node's error, not vLLM's
    assert out[1][0].error is None
    assert made["generate"][1][0].max_tokens == 40 - len(made["generate"][0][0]["prompt_token_ids"])
