"""Loading the policy: tokenizer and base model from a local Hugging Face directory, plus LoRA.

`--model tiny` resolves to the cached tiny policy (built on first use); `--model PATH` is any
local causal LM directory (e.g. a Qwen checkpoint). Nothing is downloaded: a path that is not
a model directory is an error. bf16 on GPU, fp32 on CPU. LoRA follows the arm: rank/alpha,
every linear layer, vision modules excluded (the seeds' `exclude_modules='.*visual.*'`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from train.policy.threads import quiet_cpu_threads
from warehouse.errors import TerminalError

class PolicyLoadError(TerminalError):
    """The model path is missing or not a Hugging Face model directory."""


@dataclass
class Policy:
    """A loaded policy: model (maybe PEFT-wrapped), tokenizer, where it came from."""

    model: object
    tokenizer: object
    path: Path
    name: str  # "tiny" or the directory as given
    device: object


def resolve_model_path(spec: str, tiny_cache: str | Path | None = None, log=print) -> Path:
    """The local directory for `spec` ("tiny" or a path), building the tiny policy if needed."""
    if spec == "tiny":
        from train.policy.tiny import ensure_tiny_policy

        return ensure_tiny_policy(tiny_cache, log=log)
    path = Path(spec).expanduser()
    if not (path / "config.json").is_file():
        raise PolicyLoadError(f"{path} is not a Hugging Face model directory (no config.json). "
                              "Pass --model tiny or a local checkpoint directory.")
    return path


def pick_device(device: str | None = None):
    import torch

    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def load_policy(spec: str, device: str | None = None, lora: tuple[int, int] | None = None,
                tiny_cache: str | Path | None = None, log=print) -> Policy:
    """Tokenizer + model for `spec` on `device`; wrapped with LoRA (rank, alpha) when given."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    path = resolve_model_path(spec, tiny_cache, log=log)
    dev = pick_device(device)
    if dev.type == "cpu":
        quiet_cpu_threads()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = _load_model(path, dev)
    if lora is not None:
        model = wrap_lora(model, *lora)
    model.eval()
    return Policy(model=model, tokenizer=tokenizer, path=path, name=spec, device=dev)


def _load_model(path: Path, device):
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    except ValueError:  # a multimodal checkpoint (e.g. Qwen3.5 ConditionalGeneration)
        from transformers import AutoModelForImageTextToText

        model = AutoModelForImageTextToText.from_pretrained(path, dtype=dtype)
    return model.to(device)


def wrap_lora(model, rank: int, alpha: int):
    """A PEFT model with LoRA adapters on every linear layer except the output head and the
    vision tower's (one definition, shared with the learner: train.learn.lora.add_lora)."""
    from train.learn.lora import add_lora

    return add_lora(model, rank, alpha)
