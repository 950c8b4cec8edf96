"""One schedule shape for `train run`, `train rm` and the tiny policy (train.learn.schedule): each
trainer's rates are the shared warmup and cosine at its own step count, checked against values
worked out by hand."""
from __future__ import annotations

import math

import pytest

from train.learn.control import LRSchedule
from train.learn.schedule import cosine, warmup


def test_warmup_rises_linearly_to_the_base_rate():
    assert [warmup(2.0, s, 4) for s in (1, 2, 3, 4)] == [0.5, 1.0, 1.5, 2.0]


@pytest.mark.parametrize("progress, expected", [(0.0, 1.0), (0.5, 0.55), (1.0, 0.1), (1.5, 0.1)])
def test_cosine_falls_from_the_base_to_the_floor_and_stays(progress, expected):
    assert cosine(1.0, progress, 0.1) == pytest.approx(expected)


def test_train_runs_schedule_is_the_shared_shape_from_step_one():
    s = LRSchedule(base=1e-3, warmup_steps=2, kind="cosine", total_steps=6, min_ratio=0.0)
    rates = [s.at(step) for step in range(1, 8)]
    # warmup 1/2, 2/2; then cos over steps 3..6 (a quarter each), held at the floor after
    expected = [5e-4, 1e-3, *(1e-3 * 0.5 * (1 + math.cos(math.pi * k / 4)) for k in (1, 2, 3, 4)), 0.0]
    assert rates == pytest.approx(expected, abs=1e-15)


def test_train_rms_schedule_counts_from_zero_so_its_first_step_after_warmup_is_the_peak():
    torch = pytest.importorskip("torch")
    from train.rm.run import _cosine

    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=1.0)
    schedule = _cosine(optimizer, warmup_steps=2, total=6)
    rates = []
    for _ in range(6):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    expected = [0.5, 1.0, *(0.5 * (1 + math.cos(math.pi * k / 4)) for k in (0, 1, 2, 3))]
    assert rates == pytest.approx(expected, abs=1e-15)


def test_the_tiny_policys_schedule_ends_at_a_tenth_of_its_rate():
    from train.tiny.policy import TinyRecipe, _lr

    recipe = TinyRecipe()
    assert _lr(recipe.warmup, recipe) == pytest.approx(recipe.lr)
    assert _lr(recipe.steps, recipe) == pytest.approx(0.1 * recipe.lr)
    assert _lr(recipe.warmup + 1, recipe) < recipe.lr
