"""The model soup of data root 004: an elementwise running mean of every parameter of the merged
members (the independently initialised scalar heads included), exported as bf16 full models.

The accumulator is float32 and lives on the training device by default. A host (CPU)
accumulator is allowed only when host memory holds it with room to spare: data root 004's CPU
accumulator of a 7 B model hit a 64 GiB host OOM, so :func:`check_host_memory` refuses first
and says why.
"""
from __future__ import annotations

from warehouse.errors import TerminalError

# Host bytes per parameter while a host accumulator is in use: the float32 mean (4), the bf16
# export copy (2) and the next member loading through host memory (2); plus 10% for the rest.
HOST_BYTES_PER_PARAM = 4 + 2 + 2
HEADROOM = 1.1


class SoupMemoryError(TerminalError):
    """The float32 accumulator would not fit in host memory."""


def check_host_memory(n_params: int, available_bytes: int | None = None) -> None:
    """Refuse a host accumulator that (with headroom) exceeds the memory available now."""
    import psutil

    need = n_params * HOST_BYTES_PER_PARAM * HEADROOM
    available = psutil.virtual_memory().available if available_bytes is None else available_bytes
    if need > available:
        raise SoupMemoryError(
            f"a host (CPU) soup accumulator for {n_params / 1e9:.2f} B parameters needs about "
            f"{need / 2**30:.1f} GiB of host memory (float32 mean, bf16 export copy, next member's load), only "
            f"{available / 2**30:.1f} GiB is available (data root 004's CPU accumulator hit a 64 GiB host OOM). "
            "Keep it on the GPU: --set soup_device=auto.")


class RunningMean:
    """mean_m = mean_{m-1} + (theta_m - mean_{m-1}) / m over state dicts, in float32 on `device`."""

    def __init__(self, device):
        self.device = device
        self.members = 0
        self.mean: dict | None = None

    def add(self, state_dict: dict) -> None:
        import torch

        self.members += 1
        with torch.no_grad():
            if self.mean is None:
                self.mean = {k: v.detach().to(self.device, torch.float32, copy=True) for k, v in state_dict.items()}
                return
            if state_dict.keys() != self.mean.keys():
                raise TerminalError("a soup member's parameters differ from the first member's")
            for key, value in state_dict.items():
                acc = self.mean[key]
                acc.add_(value.detach().to(self.device, torch.float32) - acc, alpha=1.0 / self.members)

    def export(self, skeleton, out_dir, dtype_name: str = "bfloat16") -> int:
        """Write the mean as a full model (the skeleton's config and class) in `dtype_name`;
        returns the parameter count."""
        import torch

        dtype = getattr(torch, dtype_name)
        state = {k: v.to(dtype) for k, v in self.mean.items()}
        skeleton.load_state_dict(state, strict=True)
        skeleton.to(dtype)
        skeleton.config.dtype = dtype_name
        skeleton.save_pretrained(out_dir)
        return sum(v.numel() for v in self.mean.values())
