"""The soup's running mean and its host-memory guard."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_running_mean_is_the_elementwise_mean_of_every_member():
    from train.rm.soup import RunningMean

    members = [{"w": torch.randn(3, 4), "head": torch.randn(1, 4)} for _ in range(5)]
    soup = RunningMean(torch.device("cpu"))
    for m in members:
        soup.add(m)
    for key in ("w", "head"):
        assert torch.allclose(soup.mean[key], torch.stack([m[key] for m in members]).mean(0), atol=1e-6)
    assert soup.members == 5 and soup.mean["w"].dtype == torch.float32


def test_a_host_accumulator_that_does_not_fit_is_refused_with_the_reason():
    from train.rm.soup import SoupMemoryError, check_host_memory

    with pytest.raises(SoupMemoryError, match=r"7.24 B parameters needs about 59.4 GiB .* only 56.0 GiB .*64 GiB host OOM"):
        check_host_memory(7_241_732_096, available_bytes=56 * 2**30)
    check_host_memory(7_241_732_096, available_bytes=96 * 2**30)  # fits: no error
