"""The policy: tiny-policy corpus and build (a shrunken recipe), loading, LoRA wrapping."""
from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.train.rollout.conftest import tiny_model, tiny_tokenizer  # noqa: F401 - shared fixtures
from train.env.tasks import BUNDLED_ROOT
from train.policy.loader import PolicyLoadError, load_policy, wrap_lora
from train.tiny.corpus import (KAGGLE_INPUT, break_code, build_examples, jitter, kaggle_paths, kaggle_traceback,
                               response_text, task_solutions)
from train.tiny.policy import MARKER, TIME_LIMIT_ENV, TinyRecipe, ensure_tiny_policy, resolve_model_path, time_limit

REPO = Path(__file__).resolve().parents[2]
SMALL = TinyRecipe(hidden_size=32, layers=1, heads=2, kv_heads=1, intermediate_size=64, vocab_size=400,
                   examples=24, steps=3, batch_size=2)


def test_jitter_changes_only_numeric_literals():
    code = "model = Forest(n_estimators=200, lr=0.1)\nfor _ in range(2000):\n    pass\n"
    variants = {jitter(code, random.Random(s)) for s in range(30)}
    assert len(variants) > 3
    for v in variants:
        assert re.sub(r"[\d.]+", "N", v) == re.sub(r"[\d.]+", "N", code)


def test_break_code_misspells_one_use_and_explains_it():
    code = (BUNDLED_ROOT / "mini-tabular-accuracy" / "reference_solution.py").read_text()
    broken, exc, tail = break_code(code, random.Random(3))
    changed = [(a, b) for a, b in zip(code.splitlines(), broken.splitlines()) if a != b]
    assert len(changed) == 1 and exc == "NameError"
    typo = re.search(r"name '(\w+)' is not defined", tail).group(1)
    assert typo in changed[0][1] and typo not in code


def test_examples_cover_every_task_and_mode_and_answer_in_the_contract_shape():
    from train.env import extract

    examples = build_examples(BUNDLED_ROOT, 60, seed=1)
    assert {e.task for e in examples} == {p.name for p in BUNDLED_ROOT.iterdir() if (p / "grader.toml").is_file()}
    assert {e.mode for e in examples} == {"draft", "improve", "debug"}
    for e in examples:
        assert extract(e.response).has_code
        assert e.messages[0]["role"] == "system"
    solutions = task_solutions(BUNDLED_ROOT / "mini-regression-rmse")
    assert len(solutions) >= 2 and extract(response_text("p", solutions[0].code)).code.strip() == solutions[0].code.strip()


def test_the_kaggle_habit_changes_only_the_input_paths_and_crashes_in_the_sandbox():
    from train.env import evaluate_code
    from train.env.tasks import load_task

    task = load_task("mini-regression-rmse")
    code = (task.root / "reference_solution.py").read_text()
    habit = kaggle_paths(code)
    assert habit.replace(KAGGLE_INPUT, "input/") == code and habit.count(KAGGLE_INPUT) == code.count('"input/')
    record = evaluate_code(task, habit)
    assert (record["status"], record["exc_type"], record["reward"]) == ("crashed", "FileNotFoundError", -0.5)
    tail = kaggle_traceback(habit)
    assert tail.splitlines()[-1] == "FileNotFoundError: [Errno 2] No such file or directory: '/kaggle/input/train.csv'"
    assert tail.splitlines()[-1] in record["term_tail"]  # the corpus's debug parents show what the sandbox shows


def test_the_habit_is_a_share_of_draft_and_improve_answers_never_a_debug_fix():
    examples = build_examples(BUNDLED_ROOT, 400, seed=2, habit=0.3)
    answers = [e for e in examples if e.mode != "debug"]
    share = sum(KAGGLE_INPUT in e.response for e in answers) / len(answers)
    assert 0.2 < share < 0.4
    debug = [e for e in examples if e.mode == "debug"]
    assert not any(KAGGLE_INPUT in e.response for e in debug)
    shown = [e for e in debug if "FileNotFoundError" in e.messages[-1]["content"]]
    assert 0.3 < len(shown) / len(debug) < 0.7
    assert not any(KAGGLE_INPUT in e.response for e in build_examples(BUNDLED_ROOT, 100, seed=2))  # habit=0


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return ensure_tiny_policy(tmp_path_factory.mktemp("tiny"), SMALL, log=lambda line: None)


def test_tiny_policy_is_saved_once_and_loads_like_any_checkpoint(tiny_dir):
    import json

    assert (tiny_dir / "config.json").is_file() and (tiny_dir / MARKER).is_file()
    assert json.loads((tiny_dir / MARKER).read_text())["steps"] == 3
    stamp = (tiny_dir / MARKER).stat().st_mtime_ns
    again = ensure_tiny_policy(tiny_dir.parent, SMALL, log=lambda line: None)
    assert again == tiny_dir and (tiny_dir / MARKER).stat().st_mtime_ns == stamp  # cached, not rebuilt
    policy = load_policy(str(tiny_dir), "cpu")
    text = policy.tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True,
                                                tokenize=False)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert policy.model.dtype.is_floating_point and str(policy.model.dtype) == "torch.float32"


BUILD_SMALL = """
import sys
from tests.train.test_run_policy import SMALL
from train.tiny.policy import ensure_tiny_policy
print(ensure_tiny_policy(sys.argv[1], SMALL))
"""


def test_processes_started_together_build_the_policy_once(tmp_path):
    """CI's stages and a test's trainers start together on a cold cache: one builds, the
    others wait for it and load what it saved (two builds wrote into one directory at once)."""
    procs = [subprocess.Popen([sys.executable, "-c", BUILD_SMALL, str(tmp_path)], cwd=REPO, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for _ in range(3)]
    outputs = [proc.communicate(timeout=600)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], outputs
    assert sum("Pre-training the tiny policy" in out for out in outputs) == 1, outputs
    assert len({out.strip().splitlines()[-1] for out in outputs}) == 1


def test_a_build_cut_short_by_the_time_limit_says_so(tiny_dir, monkeypatch):
    import json

    monkeypatch.delenv(TIME_LIMIT_ENV)  # the user's default: the recipe's 270 s, which the cut build used up
    lines = []
    full = json.loads((tiny_dir / MARKER).read_text())
    (tiny_dir / MARKER).write_text(json.dumps({**full, "steps": 1, "seconds": 270.4}))
    try:
        ensure_tiny_policy(tiny_dir.parent, SMALL, log=lines.append)
    finally:
        (tiny_dir / MARKER).write_text(json.dumps(full))
    assert any("stopped at step 1 of 3" in line and "--rebuild" in line for line in lines)
    assert not any("rebuilt" in line for line in lines)  # served from the cache with the warning
    quiet = []
    ensure_tiny_policy(tiny_dir.parent, SMALL, log=quiet.append)
    assert quiet == []


def test_a_cached_build_cut_short_is_rebuilt_when_the_limit_now_allows_more(tmp_path, monkeypatch):
    """CI's cache outlives a run: a policy cut at 270 s by an earlier run was served to a later
    run that had lifted the limit, and the tests of what the policy learns failed on it."""
    import json

    out = ensure_tiny_policy(tmp_path, SMALL, log=lambda line: None)
    full = json.loads((out / MARKER).read_text())
    (out / MARKER).write_text(json.dumps({**full, "steps": 1, "seconds": 270.4}))
    monkeypatch.setenv(TIME_LIMIT_ENV, "0")
    lines = []
    assert ensure_tiny_policy(tmp_path, SMALL, log=lines.append) == out
    assert any("stopped at step 1 of 3 (270 s); the time limit now allows more, so it is rebuilt" in line
               for line in lines)
    assert json.loads((out / MARKER).read_text())["steps"] == SMALL.steps
    monkeypatch.setenv(TIME_LIMIT_ENV, "200")  # less than the cut build had: served, with the warning
    (out / MARKER).write_text(json.dumps({**full, "steps": 1, "seconds": 270.4}))
    lines = []
    ensure_tiny_policy(tmp_path, SMALL, log=lines.append)
    assert json.loads((out / MARKER).read_text())["steps"] == 1
    assert any("--rebuild" in line for line in lines)


def test_the_time_limit_is_the_recipes_unless_the_environment_lifts_or_sets_it(monkeypatch):
    import math

    monkeypatch.delenv(TIME_LIMIT_ENV, raising=False)
    assert time_limit(SMALL) == SMALL.time_limit_s == 270.0
    monkeypatch.setenv(TIME_LIMIT_ENV, "0")
    assert time_limit(SMALL) == math.inf
    monkeypatch.setenv(TIME_LIMIT_ENV, "42.5")
    assert time_limit(SMALL) == 42.5
    monkeypatch.setenv(TIME_LIMIT_ENV, "five minutes")
    with pytest.raises(ValueError, match=rf"\${TIME_LIMIT_ENV}='five minutes': give seconds, or 0 for no limit"):
        time_limit(SMALL)


def test_the_tests_build_every_tiny_policy_without_a_time_limit():
    """tests/conftest.py: the suite's policies are the same on a slow machine as on a fast one."""
    import os

    assert os.environ.get(TIME_LIMIT_ENV) == "0"


def test_recipe_change_changes_the_cache_key():
    assert SMALL.key() != TinyRecipe().key()
    assert SMALL.key() == TinyRecipe(**{**SMALL.__dict__}).key()


def test_lora_wraps_every_linear_but_the_head(tiny_dir):
    import torch

    policy = load_policy(str(tiny_dir), "cpu", lora=(8, 16))
    names = [n for n, m in policy.model.named_modules() if hasattr(m, "lora_A")]
    linears = [n for n, m in policy.model.named_modules() if isinstance(m, torch.nn.Linear) and "lora_" not in n
               and not n.endswith("lm_head") and "base_layer" not in n]
    assert len(names) == 7 * SMALL.layers  # q k v o gate up down
    trainable = [n for n, p in policy.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert policy.model.peft_config["default"].r == 8 and policy.model.peft_config["default"].lora_alpha == 16
    assert linears == [] or all(any(n.startswith(w) for w in names) for n in linears)


def test_the_adapters_first_weights_follow_the_seed_alone(tiny_dir):
    # every rank of a run loads the policy after different work; FSDP keeps each rank's own
    # shard of the adapter, so a draw that followed the process's history mixed two adapters
    import torch

    def first_weights(seed: int, draws_before: int):
        torch.rand(draws_before)
        policy = load_policy(str(tiny_dir), "cpu", lora=(8, 16), seed=seed)
        return {n: p.detach().clone() for n, p in policy.model.named_parameters() if "lora_A" in n}

    a, b, c = first_weights(0, 1), first_weights(0, 1000), first_weights(1, 1)
    assert a.keys() == b.keys() == c.keys() and a
    assert all(torch.equal(a[n], b[n]) for n in a)
    assert not any(torch.equal(a[n], c[n]) for n in a)
    state = torch.get_rng_state()
    load_policy(str(tiny_dir), "cpu", lora=(8, 16), seed=5)
    assert torch.equal(torch.get_rng_state(), state)  # the caller's draws go on as before


def test_lora_excludes_vision_modules(tiny_model):
    import torch

    tiny_model.visual = torch.nn.Linear(4, 4)  # a stand-in vision tower
    try:
        wrapped = wrap_lora(tiny_model, 4, 4)
        assert not any("visual" in n and hasattr(m, "lora_A") for n, m in wrapped.named_modules())
        assert any(hasattr(m, "lora_A") for m in wrapped.modules())
        wrapped.unload()
    finally:
        del tiny_model.visual


def test_a_path_that_is_not_a_model_is_a_clear_error(tmp_path):
    with pytest.raises(PolicyLoadError, match="not a Hugging Face model directory"):
        resolve_model_path(str(tmp_path))
