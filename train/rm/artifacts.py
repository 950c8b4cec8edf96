"""Artifacts (saved reward models): save, retain at most K (greatest progress), load."""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from warehouse.errors import TerminalError


@dataclass
class Artifact:
    progress: int  # cumulative optimizer steps when it was saved
    path: Path
    kind: str  # "lora_adapter" (delta + scalar head) or "full_model"
    dtype: str
    parameters: int
    members: int = 1
    retained: bool = True
    loadable: bool | None = None  # set when an evaluation loads it
    seconds: float = 0.0  # save (or soup accumulate + export) time


@dataclass
class Retention:
    """At most `keep` artifacts on disk, those with the greatest progress."""

    keep: int = 3
    artifacts: list = field(default_factory=list)

    def add(self, artifact: Artifact) -> list[Artifact]:
        """Register `artifact`; delete and return those that fall out of the kept set."""
        self.artifacts.append(artifact)
        kept = sorted((a for a in self.artifacts if a.retained), key=lambda a: a.progress)
        dropped = kept[:-self.keep] if len(kept) > self.keep else []
        for old in dropped:
            shutil.rmtree(old.path, ignore_errors=True)
            old.retained = False
        return dropped


def save_adapter(model, out_dir: Path, progress: int) -> Artifact:
    """The LoRA delta and the trained scalar head (PEFT's adapter files)."""
    start = time.perf_counter()
    model.save_pretrained(out_dir)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    dtype = str(next(p for p in model.parameters() if p.requires_grad).dtype).removeprefix("torch.")
    return Artifact(progress=progress, path=out_dir, kind="lora_adapter", dtype=dtype, parameters=trainable,
                    seconds=time.perf_counter() - start)


def load_artifact(artifact: Artifact, base_path: Path, device, pad_token_id: int):
    """The artifact as a ready-to-score model; a TerminalError when it does not load."""
    import torch
    from transformers import AutoModelForSequenceClassification

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        if artifact.kind == "lora_adapter":
            from peft import PeftModel

            base = AutoModelForSequenceClassification.from_pretrained(base_path, num_labels=1, dtype=dtype)
            base.config.pad_token_id = pad_token_id
            model = PeftModel.from_pretrained(base, artifact.path)
        else:
            model = AutoModelForSequenceClassification.from_pretrained(artifact.path, dtype=dtype)
    except (OSError, ValueError, RuntimeError) as exc:
        raise TerminalError(f"artifact {artifact.path} does not load: {exc}") from exc
    return model.to(device).eval()
