"""Forced completion lengths for benchmarks on random weights (train.generate.lengths): the
named mixes, and the hf backend generating exactly the drawn lengths with EOS ignored."""
from __future__ import annotations

import pytest

from train.generate.base import GenRequest, SamplingConfig
from train.generate.lengths import draw_lengths, forced_lengths, mix_summary
from warehouse.errors import TerminalError


def test_the_arm_mix_has_median_about_3000_and_a_tenth_at_the_cap():
    lengths = draw_lengths("arm", 24576, 4000, seed=0)
    summary = mix_summary(lengths, 24576)
    assert 2800 <= summary["median"] <= 3200
    assert 0.08 <= summary["at_cap"] / len(lengths) <= 0.12
    assert max(lengths) == 24576 and min(lengths) >= 16
    assert draw_lengths("arm", 24576, 4000, seed=0) == lengths  # from the seed alone


def test_the_cap_mix_puts_every_row_at_the_cap_and_off_forces_nothing():
    assert draw_lengths("cap", 32768, 5) == [32768] * 5
    assert draw_lengths("off", 32768, 5) == []
    with pytest.raises(TerminalError, match="bench_lengths=long: use off, arm, cap"):
        draw_lengths("long", 100, 1)


def test_each_row_is_drawn_under_its_own_budget():
    lengths = forced_lengths("cap", [100, 7, 50], seed=3)
    assert lengths == [100, 7, 50]
    arm = forced_lengths("arm", [24576] * 200, seed=3)
    assert arm == forced_lengths("arm", [24576] * 200, seed=3) and arm != forced_lengths("arm", [24576] * 200, seed=4)


@pytest.mark.parametrize("paged", [True, False])
def test_the_hf_backend_generates_exactly_the_forced_lengths(tiny_model, tiny_tokenizer, messages, paged):
    from train.generate.hf import HFBackend

    backend = HFBackend(tiny_model, tiny_tokenizer, paged=paged)
    requests = [GenRequest(messages("Write a first solution."), 3), GenRequest(messages("# Task\nPredict."), 2)]
    sampling = SamplingConfig(max_new_tokens=40, seed=7, forced_lengths="arm")
    got = [[len(c.response_token_ids) for c in batch] for batch in backend.generate(requests, sampling)]
    assert [n for batch in got for n in batch] == forced_lengths("arm", [40] * 5, 7)
    capped = backend.generate(requests, SamplingConfig(max_new_tokens=40, seed=7, forced_lengths="cap"))
    assert all(len(c.response_token_ids) == 40 for batch in capped for c in batch)
