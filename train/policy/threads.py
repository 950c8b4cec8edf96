"""CPU threads for torch on a shared machine (the loader and the tiny policy's pre-training)."""
from __future__ import annotations


def quiet_cpu_threads() -> None:
    """One torch thread when the machine is already busy: oversubscribed BLAS threads spin,
    and a small model's step gets many times slower than on one core (measured 6x-30x here)."""
    import os

    import torch

    if os.getloadavg()[0] >= (os.cpu_count() or 1) - 0.5:
        torch.set_num_threads(1)
