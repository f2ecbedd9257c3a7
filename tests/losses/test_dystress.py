"""DySTreSS temperature functions (Manna et al. 2023, Alg. 1, Alg. 2, appendix C, Table 10)."""

from __future__ import annotations

import math

import pytest
import torch

from contrastkit.losses.dystress import (
    DySTreSSTemperature,
    ExponentialTemperature,
    LinearTemperature,
    MonotonicCosineTemperature,
)
from contrastkit.losses.infonce import info_nce, nt_xent
from contrastkit.losses.temperature import PairTemperature
from contrastkit.schedules import KuklevaCosineTemperature

F64 = torch.float64
S = torch.tensor([-1.0, 0.0, 1.0], dtype=F64)


def values(fn, points):
    return fn(torch.tensor(points, dtype=F64)).tolist()


def test_alg1_values_at_ends_and_centre():
    assert values(DySTreSSTemperature(0.1, 0.2), [-1.0, 0.0, 1.0]) == pytest.approx(
        [0.2, 0.1, 0.2], abs=1e-15
    )
    # half way: cos(pi * 1.5) = 0 -> mid temperature
    assert values(DySTreSSTemperature(0.07, 0.5), [0.5, -0.5]) == pytest.approx(
        [0.285, 0.285], abs=1e-15
    )


def test_alg1_matches_printed_formula_elementwise():
    s = torch.linspace(-1, 1, 101, dtype=F64)
    expected = [0.1 + 0.5 * 0.1 * (1 + math.cos(math.pi * (1 + x))) for x in s.tolist()]
    torch.testing.assert_close(
        DySTreSSTemperature(0.1, 0.2)(s), torch.tensor(expected, dtype=F64), rtol=0, atol=1e-15
    )


def test_alg2_with_shift_one_scale_one_is_alg1():
    s = torch.linspace(-1, 1, 201, dtype=F64)
    for t_min, t_max in [(0.1, 0.2), (0.05, 0.5), (0.3, 0.3)]:
        torch.testing.assert_close(
            DySTreSSTemperature(t_min, t_max, shift=1.0, scale=1.0)(s),
            DySTreSSTemperature(t_min, t_max)(s),
            rtol=0,
            atol=1e-15,
        )


@pytest.mark.parametrize(
    "shift,scale,t_max_at,t_min_at,flat",
    [
        (-0.4, 0.7, [0.4, -1.0], [-0.3], [0.5, 0.9, 1.0]),  # bump on s <= 0.4
        (-0.2, 0.6, [0.2, -1.0], [-0.4], [0.6, 1.0]),
        (0.2, 0.6, [-0.2, 1.0], [0.4], [-0.6, -1.0]),  # bump on s >= -0.2
        (0.4, 0.7, [-0.4, 1.0], [0.3], [-0.5, -1.0]),
    ],
)
def test_alg2_as_printed(shift, scale, t_max_at, t_min_at, flat):
    fn = DySTreSSTemperature(0.1, 0.2, shift=shift, scale=scale)
    assert values(fn, t_max_at) == pytest.approx([0.2] * len(t_max_at), abs=1e-12)
    assert values(fn, t_min_at) == pytest.approx([0.1] * len(t_min_at), abs=1e-12)
    assert values(fn, flat) == [0.2] * len(flat)  # held at t_max off the bump side
    s = torch.linspace(-1, 1, 401, dtype=F64)  # continuous: no jump at s = -shift
    assert fn(s).diff().abs().max() < 0.01


def test_alg2_zero_shift_covers_both_sides():
    # (shift <= 0 and s <= 0) or (shift >= 0 and s >= 0) is always true for shift = 0
    fn = DySTreSSTemperature(0.1, 0.2, shift=0.0, scale=0.5)
    assert values(fn, [-1.0, -0.5, 0.0, 0.5, 1.0]) == pytest.approx(
        [0.2, 0.1, 0.2, 0.1, 0.2], abs=1e-12
    )


def test_monotonic_cosine():
    fn = MonotonicCosineTemperature(0.1, 0.3)
    assert values(fn, [-1.0, 0.0, 1.0]) == pytest.approx([0.1, 0.2, 0.3], abs=1e-15)
    s = torch.linspace(-1, 1, 101, dtype=F64)
    assert (fn(s).diff() > 0).all()
    expected = 0.1 + 0.5 * 0.2 * (1 - torch.cos(math.pi * (1 + s) / 2))  # same half period
    torch.testing.assert_close(fn(s), expected, rtol=0, atol=1e-15)


def test_linear_and_exponential():
    lin, exp = LinearTemperature(0.1, 0.2), ExponentialTemperature(0.1, 0.2, rate=2.0)
    assert values(lin, [-1.0, -0.5, 0.0, 0.5, 1.0]) == pytest.approx(
        [0.2, 0.15, 0.1, 0.15, 0.2], abs=1e-15
    )
    assert values(exp, [-1.0, 0.0, 1.0]) == pytest.approx([0.2, 0.1, 0.2], abs=1e-15)
    half = 0.1 + 0.1 * math.expm1(1.0) / math.expm1(2.0)
    assert values(exp, [0.5, -0.5]) == pytest.approx([half, half], abs=1e-15)


@pytest.mark.parametrize(
    "fn",
    [
        DySTreSSTemperature(),
        DySTreSSTemperature(0.1, 0.2, shift=-0.4, scale=0.7),
        MonotonicCosineTemperature(),
        LinearTemperature(),
        ExponentialTemperature(),
    ],
)
def test_rounding_past_one_stays_in_range(fn):
    s = torch.tensor([-1 - 1e-6, 1 + 1e-6, 1 + 1e-3], dtype=F64)
    out = fn(s)
    assert out.shape == s.shape
    assert (out >= fn.t_min - 1e-15).all() and (out <= fn.t_max + 1e-15).all()


def test_pair_temperature_of_equal_parts_is_plain_temperature():
    g = torch.Generator().manual_seed(0)
    q, k, n = (torch.randn(s, 4, generator=g, dtype=F64) for s in (5, 5, 7))
    fn = DySTreSSTemperature()
    torch.testing.assert_close(
        info_nce(q, k, n, temperature=PairTemperature(fn, fn)),
        info_nce(q, k, n, temperature=fn),
        rtol=0,
        atol=1e-12,
    )
    # the positive's temperature alone changes the loss
    assert nt_xent(q, k, temperature=PairTemperature(0.1, 0.5)) != nt_xent(q, k, temperature=0.5)


@pytest.mark.parametrize(
    "make,name",
    [
        (lambda: DySTreSSTemperature(t_min=0.0), "t_min"),
        (lambda: DySTreSSTemperature(t_min=-0.1), "t_min"),
        (lambda: DySTreSSTemperature(t_max=math.nan), "t_max"),
        (lambda: DySTreSSTemperature(0.3, 0.2), "t_max"),
        (lambda: DySTreSSTemperature(shift=0.2), "shift"),
        (lambda: DySTreSSTemperature(scale=0.5), "scale"),
        (lambda: DySTreSSTemperature(shift=0.2, scale=0.0), "scale"),
        (lambda: DySTreSSTemperature(shift=math.inf, scale=0.5), "shift"),
        (lambda: DySTreSSTemperature(shift="left", scale=0.5), "shift"),
        (lambda: MonotonicCosineTemperature(0.2, 0.1), "t_max"),
        (lambda: LinearTemperature(t_min=0), "t_min"),
        (lambda: ExponentialTemperature(rate=0.0), "rate"),
        (lambda: PairTemperature(positive=0.0, negative=0.1), "positive"),
        (lambda: PairTemperature(positive=0.1, negative="x"), "negative"),
        (lambda: PairTemperature(positive=KuklevaCosineTemperature(), negative=0.1),
         "positive must be a float or a per-pair temperature, got a schedule"),
    ],
)
def test_bad_parameters_raise_value_error(make, name):
    with pytest.raises(ValueError, match=name):
        make()
