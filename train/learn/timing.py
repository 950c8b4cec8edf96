"""Wall-clock seconds per phase, under the published data roots' phase names (a `steps` row)."""
from __future__ import annotations

import contextlib
import time

from warehouse.vocabulary import STEP_PHASES


def _sync() -> None:
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except ImportError:  # pragma: no cover
        pass


class PhaseTimer:
    """`with timer.phase("ref"): ...`; repeated phases add up. GPU work is synchronized."""

    def __init__(self, watch=None) -> None:
        self.seconds: dict[str, float] = {}
        self._start = time.perf_counter()
        self.watch = watch  # train.progress.LiveProgress (phase_started / phase_finished) or None

    @contextlib.contextmanager
    def phase(self, name: str):
        if name not in STEP_PHASES:
            raise ValueError(f"unknown phase {name!r}; phases are {', '.join(STEP_PHASES)}")
        _sync()
        if self.watch is not None:
            self.watch.phase_started(name)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            _sync()
            took = time.perf_counter() - t0
            self.seconds[name] = self.seconds.get(name, 0.0) + took
            if self.watch is not None:
                self.watch.phase_finished(name, took)

    def row(self, step: int) -> dict:
        """The step as a timing.jsonl row: {"step", "total_s", "phases_s"}."""
        return {"step": step, "total_s": time.perf_counter() - self._start,
                "phases_s": dict(self.seconds)}
