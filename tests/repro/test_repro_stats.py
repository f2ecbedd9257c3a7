"""studies.repro.stats: t-intervals and minimum detectable effects against hand computation
with scipy.stats.t and against a printed t table."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from studies.repro.stats import SEED_SD, mde, t_interval, t_quantile


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
