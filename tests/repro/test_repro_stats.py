"""studies.repro.stats: t-intervals and minimum detectable effects against hand computation
with scipy.stats.t and against a printed t table."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from studies.repro.stats import (
    SEED_SD,
    mde,
    mde_at_power,
    power,
    standardised,
    t_interval,
    t_quantile,
)


def test_t_quantile_matches_the_printed_table():
    # two-sided 95% critical values of Student's t (any statistics textbook's table)
    for df, value in ((1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228)):
        assert t_quantile(0.975, df) == pytest.approx(value, abs=5e-4)
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_quantile(0.975, 0)
    with pytest.raises(ValueError, match="quantile level"):
        t_quantile(1.0, 3)


def test_t_interval_by_hand():
    values = [2.0, 3.5, 1.0]
    mean = 6.5 / 3
    sd = math.sqrt(((2.0 - mean) ** 2 + (3.5 - mean) ** 2 + (1.0 - mean) ** 2) / 2)
    half = stats.t.ppf(0.975, 2) * sd / math.sqrt(3)
    assert t_interval(values) == pytest.approx((mean, mean - half, mean + half), rel=1e-12)
    # the same interval as scipy's own, at another level and size
    five = [0.3, -0.1, 0.25, 0.4, 0.05]
    low, high = stats.t.interval(0.9, 4, loc=sum(five) / 5, scale=stats.sem(five))
    assert t_interval(five, confidence=0.9)[1:] == pytest.approx((low, high), rel=1e-12)
    assert t_interval([1.0, 1.0, 1.0]) == (1.0, 1.0, 1.0)  # no spread: a point
    with pytest.raises(ValueError, match="at least 2 values"):
        t_interval([1.0])


def test_minimum_detectable_effect():
    assert mde(1.37, 3) == pytest.approx(4.302653 * 1.37 / math.sqrt(3), rel=1e-6)
    assert mde(1.37, 3) == pytest.approx(3.403, abs=1e-3)
    assert mde(1.0, 5) == pytest.approx(stats.t.ppf(0.975, 4) / math.sqrt(5))
    assert mde(1.0, 8) < mde(1.0, 5) < mde(1.0, 3)  # more seeds: smaller effects detectable
    with pytest.raises(ValueError, match="at least 2 seeds"):
        mde(1.0, 1)
    with pytest.raises(ValueError, match="sigma"):
        mde(-1.0, 3)
    assert all(sd > 0 and source for sd, source in SEED_SD.values())


def test_power_against_a_simulation():
    """The power of the 95% t-interval (its lower end above 0) with 3 seeds, from the
    noncentral t, against a Monte Carlo of paired values drawn with that mean and spread."""
    import numpy as np

    rng = np.random.default_rng(0)
    sigma, n = 1.37, 3
    for effect in (mde(sigma, n), mde_at_power(sigma, n), 1.0):
        draws = rng.normal(effect, sigma, size=(200_000, n))
        mean, sd = draws.mean(axis=1), draws.std(axis=1, ddof=1)
        simulated = np.mean(mean - stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n) > 0)
        assert power(effect, sigma, n) == pytest.approx(simulated, abs=0.005)
    # the MDE as defined (expected lower end at 0) is about 61% power, not 50% or 80%
    assert power(mde(sigma, n), sigma, n) == pytest.approx(0.615, abs=0.002)
    assert power(mde_at_power(sigma, n), sigma, n) == pytest.approx(0.8, abs=1e-9)
    assert mde_at_power(sigma, n) == pytest.approx(4.47, abs=0.01)  # points of accuracy
    with pytest.raises(ValueError, match="sigma"):
        power(1.0, 0.0, 3)
    with pytest.raises(ValueError, match="power"):
        mde_at_power(1.0, 3, target=1.0)


def test_standardised_effect_by_hand():
    values = [0.2, 0.21, 0.22]
    assert standardised(values) == pytest.approx(0.21 / 0.01)
    assert standardised([-1.0, -1.0, -1.0]) == -math.inf
    with pytest.raises(ValueError, match="at least 2"):
        standardised([1.0])
