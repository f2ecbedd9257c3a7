"""Seed statistics of the CPU study's verdicts: paired t-intervals and minimum detectable effects.

For a claim measured on ``n`` seeds (one paired value ``d_i`` per seed, e.g. the accuracy of run
A minus that of run B trained with the same seed), the verdict reads

* the mean ``d = (1/n) sum_i d_i``, the sample standard deviation
  ``s = sqrt(sum_i (d_i - d)^2 / (n - 1))`` and the two-sided 95% Student t-interval
  ``d -/+ t_{0.975, n-1} s / sqrt(n)`` (:func:`t_interval`);
* the minimum detectable effect, fixed before the runs from an assumed seed standard deviation
  ``sigma`` of the paired value: ``MDE = t_{0.975, n-1} sigma / sqrt(n)`` (:func:`mde`), the
  true effect at which, if the seeds' spread is ``sigma``, the interval's expected lower end is
  0 (an even chance of a significant result). A paper effect below it cannot be told apart from
  seed noise with ``n`` seeds: the claim is "not testable at this scale".

The assumed ``sigma`` of each kind of quantity is :data:`SEED_SD` (measured on the earlier
Part A runs, see there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

CONFIDENCE = 0.95

#: Assumed seed standard deviation of a paired value, per quantity (key: the metric's name, or
#: ``accuracy`` for every top-1 accuracy in points), and where each number comes from. The
#: numbers are the pooled paired-difference spread of the earlier Part A runs (ResNet-18 width
#: 8, 156 steps; docs/reproduction.json at commit e5c16f6, tag ``cpu``): for every pair of runs
#: of one study with two finished seeds, ``(d_0 - d_1)^2 / 2`` estimates ``sigma^2`` with one
#: degree of freedom;
#: ``sigma`` is the square root of their mean. Those runs were shorter and narrower than the
#: redesigned study's, so these are assumptions, not measurements of it.
SEED_SD: dict[str, tuple[float, str]] = {
    "accuracy": (1.37, "200-NN top-1 differences of 14 run pairs of the earlier Part A "
                       "(baselines, DySTreSS, SCE lambda and tau_m, temperature studies), 2 "
                       "seeds each: 14 degrees of freedom"),
    "analyze/uniformity": (0.047, "7 run pairs of the earlier Part A (DySTreSS, temperature, "
                                  "SINCERE studies), 2 seeds each"),
    "analyze/tolerance": (0.013, "the same 7 run pairs"),
    "analyze/alignment": (0.011, "the same 7 run pairs"),
    "analyze/interclass_uniformity": (0.027, "the same 7 run pairs"),
    "local_separation": (0.0066, "the same 7 run pairs (positive minus nearest-negative "
                                 "similarity)"),
}


def t_quantile(p: float, df: int) -> float:
    """``t_{p, df}``: the ``p`` quantile of Student's t distribution with ``df`` degrees of
    freedom (scipy.stats.t.ppf).

    Raises:
        ValueError: when ``df < 1`` or ``p`` is not in (0, 1).
        ImportError: when scipy (installed with the ``data`` extra) is missing.
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile level must be in (0, 1), got {p}")
    try:
        from scipy.stats import t
    except ImportError as err:
        raise ImportError("the study's verdicts need scipy: pip install 'contrastkit[data]'"
                          ) from err
    return float(t.ppf(p, df))


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE
               ) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of ``values`` and its two-sided Student t-interval,
    ``mean -/+ t_{(1 + confidence) / 2, n - 1} s / sqrt(n)`` (``s``: sample std, ``n - 1``).

    Raises:
        ValueError: with fewer than 2 values (no spread to estimate).
    """
    n = len(values)
    if n < 2:
        raise ValueError(f"a t-interval needs at least 2 values, got {n}")
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile((1.0 + confidence) / 2.0, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def mde(sigma: float, n: int, confidence: float = CONFIDENCE) -> float:
    """Minimum detectable effect of ``n`` paired seeds with seed standard deviation ``sigma``:
    ``t_{(1 + confidence) / 2, n - 1} sigma / sqrt(n)`` (see the module docstring).

    Raises:
        ValueError: when ``n < 2`` or ``sigma < 0``.
    """
    if n < 2:
        raise ValueError(f"a minimum detectable effect needs at least 2 seeds, got {n}")
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    return t_quantile((1.0 + confidence) / 2.0, n - 1) * sigma / math.sqrt(n)
