"""GPUs for node execution: a pool that leases whole GPUs to nodes, and NVML sampling.

A node whose PEP 723 ``[tool.resources]`` declares ``gpu = N`` waits for N free GPUs of the
execution pool (``train run --exec-gpus``; by default every GPU the policy does not use),
runs with ``CUDA_VISIBLE_DEVICES`` set to them, and gives them back when it ends. One node per
GPU at a time, as the published data roots' pods had it, so nodes never share a GPU's memory; the wait is
part of ``exec_timings.pending``.

While it runs, the sandbox samples its GPUs through NVML (``nvidia-ml-py``, imported as
``pynvml``): utilisation (percent, mean over the node's GPUs) and memory used. A node that
leaves its GPUs under ``idle_gpu_pct`` for ``idle_window_s`` (the CPU idle window) is
killed and reported as ``GpuIdleError`` (reward -0.2), as data root 002's leaves did.

NVML counts GPUs in PCI bus order; the node gets ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that
CUDA's indices are the same.
"""
from __future__ import annotations

import logging
import threading
from contextlib import contextmanager

log = logging.getLogger(__name__)


class GpuPool:
    """Whole GPUs leased to nodes; ``lease(n)`` blocks until n are free."""

    def __init__(self, indices: list[int] | tuple[int, ...]):
        self.indices = tuple(dict.fromkeys(int(i) for i in indices))
        self._free = list(self.indices)
        self._changed = threading.Condition()

    def __len__(self) -> int:
        return len(self.indices)

    @contextmanager
    def lease(self, n: int):
        """Yields a tuple of n GPU indices (fewer when the pool is smaller than n)."""
        n = min(n, len(self.indices))
        with self._changed:
            self._changed.wait_for(lambda: len(self._free) >= n)
            taken, self._free = tuple(self._free[:n]), self._free[n:]
        try:
            yield taken
        finally:
            with self._changed:
                self._free.extend(taken)
                self._changed.notify_all()


def nvml():
    """The ``pynvml`` module, initialised; None where there is no NVML (no driver, no GPU)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception as exc:  # noqa: BLE001 - ImportError or pynvml.NVMLError
        log.debug("no NVML: %s", exc)
        return None


def device_count(lib=None) -> int:
    lib = lib or nvml()
    return lib.nvmlDeviceGetCount() if lib is not None else 0


def default_exec_gpus(policy_gpus: set[int], lib=None) -> list[int]:
    """Every GPU of the machine that the policy does not use."""
    return [i for i in range(device_count(lib)) if i not in policy_gpus]


def parse_exec_gpus(text: str | None) -> list[int] | None:
    """``--exec-gpus``: None (the default rule), "none" (no GPU for nodes) or "1,2,3"."""
    if text is None or text.strip() == "":
        return None
    if text.strip().lower() == "none":
        return []
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        from train.env.errors import EnvError

        raise EnvError(f"--exec-gpus {text!r}: expected GPU indices such as 1,2,3, or none.") from None


class GpuMonitor:
    """Samples the node's GPUs: utilisation and memory, with their mean and peak."""

    def __init__(self, indices: tuple[int, ...], lib=None):
        self.lib = lib or nvml()
        self.handles = [self.lib.nvmlDeviceGetHandleByIndex(i) for i in indices] if self.lib else []
        self.utils: list[float] = []
        self.mem_peak = 0

    @property
    def available(self) -> bool:
        return bool(self.handles)

    def sample(self) -> float | None:
        """Mean utilisation (percent) of the node's GPUs now; None without NVML."""
        if not self.handles:
            return None
        try:
            util = sum(self.lib.nvmlDeviceGetUtilizationRates(h).gpu for h in self.handles) / len(self.handles)
            mem = sum(self.lib.nvmlDeviceGetMemoryInfo(h).used for h in self.handles)
        except Exception as exc:  # noqa: BLE001 - pynvml.NVMLError: keep the node running
            log.warning("NVML sample failed: %s", exc)
            return None
        self.utils.append(float(util))
        self.mem_peak = max(self.mem_peak, mem)
        return float(util)

    def name(self) -> str | None:
        if not self.handles:
            return None
        name = self.lib.nvmlDeviceGetName(self.handles[0])
        return name.decode() if isinstance(name, bytes) else str(name)

    def summary(self) -> dict:
        """The node record's GPU columns (None when nothing was sampled)."""
        if not self.utils:
            return {"gpu_util": None, "gpu_util_peak": None, "gpu_mem_used_gi": None, "gpu_name": self.name()}
        return {"gpu_util": round(sum(self.utils) / len(self.utils), 2), "gpu_util_peak": round(max(self.utils), 2),
                "gpu_mem_used_gi": round(self.mem_peak / 2**30, 4), "gpu_name": self.name()}
