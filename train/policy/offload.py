"""The policy's frozen base weights off the GPU while the engine generates (`--set policy_offload=host`).

With vLLM the engine holds a copy of the base weights of its own, so during generation the
policy's copy is dead weight: a 27B in bf16 is 54 GB of it. The base never changes (only the
LoRA adapter trains), so its host copy is taken once, in pinned memory, and afterwards
offloading only frees the GPU storage (`param.data` becomes an empty tensor) and restoring
copies the host copy back (about 2 s for 54 GB at PCIe 5 rates). The adapter, its optimizer
state and anything trainable stay where they are.

The run's order (train/run.py): the policy is offloaded before the engine starts (the engine
sizes its KV cache from the memory it finds free); `gen` runs; the engine sleeps; the base is
restored for the step; after the step it is offloaded again, and the merged weight sync reads
the base from the host copy, one tensor at a time on the GPU (train.generate.vllm_backend.
merged_weights), so the policy's weights and the engine's are never on the GPU together.
On CPU the same calls run (the "device" copy is freed and restored from the host copy), which
is what the tests check.
"""
from __future__ import annotations

OFFLOADS = ("off", "host")


class BaseOffload:
    """Move a (peft) policy's frozen base parameters between the device and a host copy."""

    def __init__(self, model):
        import torch

        self.model = model
        self.params = [(name, p) for name, p in model.named_parameters() if not p.requires_grad]
        self.device = self.params[0][1].device if self.params else torch.device("cpu")
        self.host: dict[str, torch.Tensor] = {}
        self.names = {id(p): name for name, p in self.params}
        self.buffer = None  # the host copy: one buffer, each parameter a view of it
        self.registered = False  # page-locked (cudaHostRegister): copies to the device run at full speed
        self.offloaded = False
        model._base_offload = self  # the merged weight sync reads the host copy through it

    @property
    def host_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.host.values())

    def offload(self) -> int:
        """Free the base's device storage (host copy taken the first time); bytes freed."""
        import torch

        if self.offloaded:
            return 0
        pin = self.device.type == "cuda"
        if not self.host:
            self._take_host_copy(pin)
        freed = 0
        with torch.no_grad():
            for name, param in self.params:
                if name not in self.host:  # trainable since construction: never dropped
                    continue
                freed += param.numel() * param.element_size()
                param.data = torch.empty(0, dtype=param.dtype, device=param.device)
        if pin:
            torch.cuda.empty_cache()
        self.offloaded = True
        return freed

    def _take_host_copy(self, pin: bool) -> None:
        """One host buffer of exactly the base's size, page-locked with cudaHostRegister on CUDA
        (PyTorch's pinned allocator rounds each allocation up to a power of two: up to 2x the
        host memory for a 54 GB base), each parameter a view of it."""
        import torch

        frozen = [(name, p) for name, p in self.params if not p.requires_grad]
        offsets, total = [], 0
        for _, param in frozen:
            offsets.append(total)
            total += -(-param.numel() * param.element_size() // 512) * 512  # 512-byte aligned views
        self.buffer = torch.empty(total, dtype=torch.uint8)
        if pin and total:
            err = torch.cuda.cudart().cudaHostRegister(self.buffer.data_ptr(), total, 0)
            self.registered = int(err) == 0 if not hasattr(err, "value") else err.value == 0
        with torch.no_grad():
            for (name, param), offset in zip(frozen, offsets):
                size = param.numel() * param.element_size()
                view = self.buffer[offset:offset + size].view(param.dtype).view(param.shape)
                view.copy_(param.data)
                self.host[name] = view
        if pin:
            torch.cuda.synchronize()

    def restore(self) -> int:
        """Copy the base back onto the device; bytes copied."""
        import torch

        if not self.offloaded:
            return 0
        moved = 0
        with torch.no_grad():
            for name, param in self.params:
                if name not in self.host:
                    continue
                host = self.host[name]
                param.data = host.to(self.device, non_blocking=True) if self.device.type == "cuda" else host.clone()
                moved += host.numel() * host.element_size()
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.offloaded = False
        return moved

    def source(self, param):
        """The tensor holding `param`'s values now: its host copy while offloaded."""
        if not self.offloaded:
            return param
        return self.host.get(self.names.get(id(param)), param)


def offload_of(model) -> BaseOffload | None:
    """The BaseOffload attached to `model` (or to the peft model around it), if any."""
    return getattr(model, "_base_offload", None)


def check_offload(value: str) -> str:
    from warehouse.errors import TerminalError

    if value not in OFFLOADS:
        raise TerminalError(f"--set policy_offload={value}: use {' or '.join(OFFLOADS)}")
    return value
