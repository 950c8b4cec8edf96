"""Stability for long runs: the learning-rate schedule, the adaptive KL coefficient and the
KL / entropy band, alone, through the learner, across a checkpoint, and in `train run`."""
import dataclasses
import math

import pytest

from learn_helpers import one_thread, optimizer_for, random_samples, tiny_policy  # noqa: F401
from tests.train.test_run import CannedBackend, model_dir, tiny_model, tiny_tokenizer  # noqa: F401
from train.learn.checkpoint import ResumePoint, load_checkpoint, save_checkpoint
from train.learn.control import Band, KLControl, LRSchedule, StabilityStopError
from train.learn.loss import LossConfig
from train.learn.step import StepConfig
from train.learn.timing import PhaseTimer
from train.learn.learner import Learner
from train.run import run
from train.settings import RunOptions, resolve_settings
from warehouse.db import connect
from warehouse.errors import TerminalError


def test_warmup_is_linear_then_constant():
    s = LRSchedule(base=1e-3, warmup_steps=4)
    assert [s.at(k) for k in (1, 2, 4, 5, 50)] == pytest.approx([2.5e-4, 5e-4, 1e-3, 1e-3, 1e-3])


def test_cosine_falls_from_the_base_to_its_floor_at_the_last_step():
    s = LRSchedule(base=1.0, warmup_steps=2, kind="cosine", total_steps=12, min_ratio=0.1)
    assert s.at(1) == pytest.approx(0.5) and s.at(2) == pytest.approx(1.0)
    assert s.at(7) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert s.at(12) == pytest.approx(0.1) and s.at(20) == pytest.approx(0.1)
    rates = [s.at(k) for k in range(2, 13)]
    assert all(a > b for a, b in zip(rates, rates[1:]))


@pytest.mark.parametrize("kwargs, words", [({"kind": "linear"}, "constant, cosine"),
                                           ({"kind": "cosine", "warmup_steps": 5, "total_steps": 5}, "--rounds"),
                                           ({"min_ratio": 2.0}, "minimum ratio")])
def test_a_bad_schedule_is_one_clear_error(kwargs, words):
    with pytest.raises(TerminalError, match=words):
        LRSchedule(base=1e-3, **kwargs)


def test_the_kl_coefficient_moves_toward_its_target_at_most_20_percent_a_step():
    control = KLControl(coef=0.01, target=0.1)
    assert control.next_coef(0.01, 0.2) == pytest.approx(0.012)  # 2x the target: +20% (clipped)
    assert control.next_coef(0.01, 0.11) == pytest.approx(0.011)  # 10% over: +10%
    assert control.next_coef(0.01, 0.0) == pytest.approx(0.008)  # far under: -20%
    assert KLControl(coef=0.01, target=0.1, horizon=2).next_coef(0.01, 0.2) == pytest.approx(0.011)
    assert KLControl(coef=0.01).next_coef(0.01, 5.0) == 0.01  # no target: fixed
    assert control.next_coef(0.01, None) == 0.01


def test_the_band_names_the_metric_and_the_setting_to_change():
    band = Band(kl_max=0.5, entropy_min=0.1)
    assert band.error(3, {"kl": 0.4, "entropy": 1.0}) is None
    assert "KL to the reference 0.7 is above kl_max 0.5" in band.error(3, {"kl": 0.7, "entropy": 1.0})
    assert "--resume-from RUN:2" in band.error(3, {"kl": 0.7, "entropy": 1.0})
    assert "entropy 0.05 is below entropy_min 0.1" in band.error(4, {"kl": 0.0, "entropy": 0.05})
    assert Band().error(1, {"kl": 1e9, "entropy": 0.0}) is None  # no bounds set


def _learner(policy, optimizer, **kw):
    config = StepConfig(token_budget=64, loss=LossConfig(kl_coef=0.05))
    schedule = LRSchedule(base=1e-2, warmup_steps=2)
    return Learner(policy, optimizer, config, schedule, KLControl(coef=0.05, target=1e-6), Band(), **kw)


def test_the_learner_steps_at_the_scheduled_rate_and_carries_the_coefficient_through_a_checkpoint(tmp_path):
    policy = tiny_policy(init=False)
    optimizer = optimizer_for(policy)
    learner = _learner(type("P", (), {"model": policy})(), optimizer)
    first = learner.step(random_samples(6, seed=1), PhaseTimer(), step_no=1)
    assert first["lr"] == pytest.approx(5e-3) and first["kl_coef"] == pytest.approx(0.05)
    assert first["kl"] > 1e-6  # a random adapter is far from the reference: the coefficient rises
    second = learner.step(random_samples(6, seed=2), PhaseTimer(), step_no=2)
    assert second["lr"] == pytest.approx(1e-2) and second["kl_coef"] == pytest.approx(0.06)
    save_checkpoint(tmp_path, "r", 2, policy, optimizer)

    resumed = optimizer_for(policy)
    load_checkpoint(tmp_path, ResumePoint("r", 2), policy, resumed)
    third = _learner(type("P", (), {"model": policy})(), resumed).step(random_samples(6, seed=3), PhaseTimer(), 3)
    assert third["kl_coef"] == pytest.approx(0.072)  # 0.05 x 1.2 x 1.2: the resumed run continues


def test_the_schedule_and_kl_control_are_settable_and_recorded_on_the_run_row():
    from train.settings import parse_sets

    opts = RunOptions(model="tiny", learn=True, rounds=4, sets=parse_sets(["lr_schedule=cosine", "lr_warmup_steps=3",
                                                                 "kl_target=0.05", "kl_max=0.5"]))
    _, knobs, overrides = resolve_settings(opts)
    assert (knobs.lr_schedule, knobs.lr_warmup_steps, knobs.kl_target, knobs.kl_max) == ("cosine", 3, 0.05, 0.5)
    assert {k: overrides[k] for k in ("lr_schedule", "lr_warmup_steps", "kl_target", "kl_coef", "kl_max")} == {
        "lr_schedule": "cosine", "lr_warmup_steps": 3, "kl_target": 0.05, "kl_coef": 0.001, "kl_max": 0.5}
    _, _, plain = resolve_settings(dataclasses.replace(opts, sets={}))
    assert plain["lr_schedule"] == "constant" and plain["kl_target"] == 0.0  # recorded even when not set


def test_a_run_whose_step_leaves_the_band_stops_after_its_round_is_written(db_url, model_dir, monkeypatch, tmp_path):
    monkeypatch.setattr("train.factories.make_backend", lambda opts, arm, knobs, policy: CannedBackend(policy.tokenizer))
    opts = RunOptions(model=str(model_dir), rounds=3, tasks=("mini-tabular-accuracy",), db_url=db_url, learn=True,
                      health_gate=False, run_id="r_band",
                      sets={"siblings_per_expansion": "2", "lr_warmup_steps": "2", "entropy_max": "1e-9"})
    with pytest.raises(StabilityStopError, match=r"step 1: entropy .* is above entropy_max 1e-09"):
        run(opts, log=lambda line: None)
    with connect(db_url, read_only=True) as con:
        assert con.execute('SELECT max("round") FROM "nodes" WHERE "run_id" = \'r_band\'').fetchone() == (1,)
        step = con.execute('SELECT "lr", json_extract("extra", \'$.kl_coef\')::DOUBLE FROM "step_metrics" '
                           'WHERE "run_id" = \'r_band\'').fetchall()
        overrides = con.execute('SELECT overrides FROM runs WHERE run_id = \'r_band\'').fetchone()[0]
    assert step == [(pytest.approx(3e-5 / 2), pytest.approx(0.001))]  # warmup's first step, the fixed coefficient
    assert '"lr_warmup_steps": 2' in overrides
