"""Loading the policy: tokenizer and base model from a local Hugging Face directory, plus LoRA.

The directory is any local causal LM (e.g. a Qwen checkpoint, or the tiny policy's build:
`--model` resolves to one in :func:`train.tiny.policy.resolve_model_path`). Nothing is
downloaded: a path that is not a model directory is an error. bf16 on GPU, fp32 on CPU. LoRA
follows the arm: rank/alpha, every linear layer, vision modules excluded (the published data roots'
`exclude_modules='.*visual.*'`; train.policy.lora).
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
    device: object


def model_directory(spec: str | Path) -> Path:
    """`spec` as a local Hugging Face model directory; a clear error when it is not one."""
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


def load_policy(path: str | Path, device: str | None = None, lora: tuple[int, int] | None = None,
                seed: int = 0, random_weights: bool = False) -> Policy:
    """Tokenizer + model from the model directory `path` on `device`; wrapped with LoRA (rank,
    alpha) when given, its initial weights drawn from `seed` (see `wrap_lora`). `random_weights`
    (benchmarks): the directory's config only, the weights drawn on the device from `seed`
    (a 27B checkpoint need not exist on disk)."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    path = model_directory(path)
    dev = pick_device(device)
    if dev.type == "cpu":
        quiet_cpu_threads()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = _random_model(path, dev, seed) if random_weights else _load_model(path, dev)
    if lora is not None:
        model = wrap_lora(model, *lora, seed=seed)
    model.eval()
    return Policy(model=model, tokenizer=tokenizer, path=path, device=dev)


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


def _random_model(path: Path, device, seed: int):
    """The model the directory's config describes, built on `device` with random weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    config = AutoConfig.from_pretrained(path)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.device(device):
        torch.manual_seed(seed)
        try:
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
        except ValueError:  # a multimodal config (e.g. Qwen3.5 ConditionalGeneration)
            from transformers import AutoModelForImageTextToText

            model = AutoModelForImageTextToText.from_config(config, dtype=dtype)
    return model


def wrap_lora(model, rank: int, alpha: int, seed: int = 0):
    """A PEFT model with LoRA adapters on every linear layer except the output head and the
    vision tower's (one definition, shared with the learner: train.policy.lora.add_lora).

    The adapter's random initial weights (lora_A) are drawn from `seed` alone, not from
    whatever the process drew before: every rank of a run must start from the same adapter
    (FSDP keeps each rank's own shard of it; the ranks had mixed two draws), and a rerun with
    the run's seed from the one it had. The caller's random state is left as it was."""
    import torch

    from train.policy.lora import add_lora

    device = next(model.parameters()).device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        return add_lora(model, rank, alpha)
