"""The one check of a temperature setting (contrastkit.losses.temperature) and its resolution."""

from __future__ import annotations

import math

import pytest
import torch

from contrastkit.losses.dystress import DySTreSSTemperature
from contrastkit.losses.temperature import (
    PairTemperature,
    check_temperature,
    resolve_temperature,
    split_temperature,
)
from contrastkit.schedules import KuklevaCosineTemperature, LinearSchedule, ScheduleState


@pytest.mark.parametrize("value", [0.1, 2, torch.tensor(0.5), torch.tensor(0.5).double()])
def test_positive_numbers_and_0d_float_tensors_are_valid(value):
    check_temperature("t", value)
    check_temperature("t", value, schedule=True, per_pair=False)


@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, math.nan, True, "0.1", torch.tensor(0.0),
                                   torch.tensor([0.1]), torch.tensor(1)])
def test_bad_values_raise_naming_the_setting(value):
    with pytest.raises(ValueError, match="my_temperature"):
        check_temperature("my_temperature", value)


def test_schedules_only_where_a_method_evaluates_them():
    schedule = LinearSchedule(0.1, 0.2)
    check_temperature("t", schedule, schedule=True)
    with pytest.raises(ValueError, match="t is a schedule"):
        check_temperature("t", schedule)


@pytest.mark.parametrize("value", [DySTreSSTemperature(), PairTemperature(0.1, 0.2), lambda s: s])
def test_per_pair_temperatures_only_where_the_loss_takes_them(value):
    check_temperature("t", value)
    with pytest.raises(ValueError, match="t is a per-pair temperature"):
        check_temperature("t", value, per_pair=False)


def test_split_and_resolve():
    pair = PairTemperature(0.1, 0.3)
    assert split_temperature(pair) == (0.1, 0.3) and split_temperature(0.2) == (0.2, 0.2)
    state = ScheduleState(step=0, total_steps=10, epoch=0.0, total_epochs=1.0)
    assert resolve_temperature(pair, state) is pair
    kukleva = KuklevaCosineTemperature(t_min=0.1, t_max=1.0, period=4.0)
    assert resolve_temperature(kukleva, state) == pytest.approx(1.0)  # starts at t_max
    assert resolve_temperature(LinearSchedule(0.1, 0.3), ScheduleState(5, 10)) == pytest.approx(0.2)
