"""Temperature / coefficient schedules: endpoints, midpoints and paper formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from contrastkit.schedules import (
    ConstantSchedule,
    CosineSchedule,
    EpochWarmupSchedule,
    KuklevaCosineTemperature,
    LinearSchedule,
    MACLTemperature,
    ScheduleState,
    WarmupSchedule,
)


def _at(step: int, total: int = 100, **kw: object) -> ScheduleState:
    return ScheduleState(step=step, total_steps=total, **kw)  # type: ignore[arg-type]


def test_state_validation_and_progress() -> None:
    assert _at(25).progress == 0.25
    assert _at(250).progress == 1.0
    with pytest.raises(ValueError, match="total_steps"):
        ScheduleState(step=0, total_steps=0)
    with pytest.raises(ValueError, match="step"):
        ScheduleState(step=-1)


def test_constant() -> None:
    assert ConstantSchedule(0.07)(_at(0)) == 0.07
    assert ConstantSchedule(0.07)(_at(99)) == 0.07


def test_linear_endpoints_midpoint() -> None:
    s = LinearSchedule(0.0, 0.5)
    assert s(_at(0)) == 0.0
    assert s(_at(50)) == pytest.approx(0.25)
    assert s(_at(100)) == pytest.approx(0.5)
    assert s(_at(200)) == pytest.approx(0.5)


def test_cosine_endpoints_midpoint_quarter() -> None:
    s = CosineSchedule(1.0, 0.2)
    assert s(_at(0)) == pytest.approx(1.0)
    assert s(_at(50)) == pytest.approx(0.6)
    assert s(_at(25)) == pytest.approx(0.2 + 0.8 * 0.5 * (1 + math.cos(math.pi / 4)))
    assert s(_at(100)) == pytest.approx(0.2)
    assert s(_at(150)) == pytest.approx(0.2)
    increasing = CosineSchedule(0.0, 1.0)
    assert increasing(_at(0)) == pytest.approx(0.0) and increasing(_at(100)) == pytest.approx(1.0)


def test_warmup_then_constant() -> None:
    s = WarmupSchedule(start=0.1, end=0.05, warmup_steps=10)
    assert s(_at(0)) == pytest.approx(0.1)
    assert s(_at(5)) == pytest.approx(0.075)
    assert s(_at(10)) == pytest.approx(0.05)
    assert s(_at(90)) == pytest.approx(0.05)
    assert WarmupSchedule(0.1, 0.05, 0)(_at(0)) == 0.05
    with pytest.raises(ValueError, match="warmup_steps"):
        WarmupSchedule(0.1, 0.05, -1)


def test_epoch_warmup_is_dinos_linspace_per_epoch() -> None:
    """DINO's teacher temperature: np.linspace(0.04, 0.07, 30)[epoch] for the first 30 epochs
    (0.07 already in epoch 29), then 0.07; constant inside an epoch."""
    s = EpochWarmupSchedule(start=0.04, end=0.07, epochs=30)
    official = np.concatenate([np.linspace(0.04, 0.07, 30), np.full(70, 0.07)])
    steps_per_epoch = 7
    for step in range(100 * steps_per_epoch):
        state = ScheduleState(step=step, total_steps=700, epoch=step / steps_per_epoch,
                              total_epochs=100.0)
        assert s(state) == pytest.approx(official[step // steps_per_epoch], rel=1e-12), step
    assert EpochWarmupSchedule(0.04, 0.07, 1)(ScheduleState(epoch=0.5)) == 0.04
    assert EpochWarmupSchedule(0.04, 0.07, 1)(ScheduleState(epoch=1.0)) == 0.07
    assert EpochWarmupSchedule(0.04, 0.07, 0)(ScheduleState(epoch=0.0)) == 0.07
    with pytest.raises(ValueError, match="epochs"):
        EpochWarmupSchedule(0.04, 0.07, -1)
    with pytest.raises(ValueError, match="epochs"):
        EpochWarmupSchedule(0.04, 0.07, 2.5)  # type: ignore[arg-type]


def test_kukleva_cosine_temperature_by_epoch() -> None:
    s = KuklevaCosineTemperature(t_min=0.1, t_max=1.0, period=400)
    ep = lambda e: ScheduleState(epoch=e)  # noqa: E731
    assert s(ep(0)) == pytest.approx(1.0)  # starts at t_max
    assert s(ep(100)) == pytest.approx(0.55)  # quarter period: midpoint
    assert s(ep(200)) == pytest.approx(0.1)  # half period: t_min
    assert s(ep(400)) == pytest.approx(1.0)  # periodic
    assert s(ep(650)) == pytest.approx(0.1 + 0.45 * (1 + math.cos(2 * math.pi * 650 / 400)))
    shifted = KuklevaCosineTemperature(0.1, 1.0, 400, offset=math.pi)
    assert shifted(ep(0)) == pytest.approx(0.1)


def test_kukleva_step_unit_and_validation() -> None:
    s = KuklevaCosineTemperature(0.2, 0.6, period=10, unit="step")
    assert s(_at(5)) == pytest.approx(0.2)
    assert s(_at(10)) == pytest.approx(0.6)
    with pytest.raises(ValueError, match="t_min"):
        KuklevaCosineTemperature(0.5, 0.1)
    with pytest.raises(ValueError, match="period"):
        KuklevaCosineTemperature(period=0)


def test_macl_temperature_formula() -> None:
    s = MACLTemperature(t0=0.1, alpha=0.5, a0=0.0)
    sims = torch.tensor([0.2, 0.4, 0.9], requires_grad=True)
    tau = s(ScheduleState(positive_similarity=sims))
    assert isinstance(tau, torch.Tensor) and not tau.requires_grad and tau.dim() == 0
    assert float(tau) == pytest.approx(0.1 * (1 + 0.5 * 0.5))
    assert s(ScheduleState(positive_similarity=1.0)) == pytest.approx(0.15)
    assert s(ScheduleState(positive_similarity=-1.0)) == pytest.approx(0.05)
    shifted = MACLTemperature(t0=0.2, alpha=0.4, a0=0.5)
    assert shifted(ScheduleState(positive_similarity=0.5)) == pytest.approx(0.2)
    assert shifted(ScheduleState(positive_similarity=0.0)) == pytest.approx(0.2 * 0.8)
    clamped = MACLTemperature(t0=0.1, alpha=2.0, a0=1.0, min_value=0.01)
    assert clamped(ScheduleState(positive_similarity=0.0)) == 0.01
    assert float(clamped(ScheduleState(positive_similarity=torch.zeros(3)))) == pytest.approx(0.01)


def test_macl_requires_similarity() -> None:
    with pytest.raises(ValueError, match="positive_similarity"):
        MACLTemperature()(ScheduleState())
    with pytest.raises(ValueError, match="alpha"):
        MACLTemperature(alpha=-0.1)
