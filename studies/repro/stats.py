"""Seed statistics of the CPU study's verdicts: paired t-intervals and minimum detectable effects.

For a claim measured on ``n`` seeds (one paired value ``d_i`` per seed, e.g. the accuracy of run
A minus that of run B trained with the same seed), the verdict reads

* the mean ``d = (1/n) sum_i d_i``, the sample standard deviation
  ``s = sqrt(sum_i (d_i - d)^2 / (n - 1))`` and the two-sided 95% Student t-interval
  ``d -/+ t_{0.975, n-1} s / sqrt(n)`` (:func:`t_interval`);
* the minimum detectable effect, fixed before the runs from an assumed seed standard deviation
  ``sigma`` of the paired value: ``MDE = t_{0.975, n-1} sigma / sqrt(n)`` (:func:`mde`), the
  true effect at which, if the seeds' spread is ``sigma``, the interval's expected lower end is
  0. Because the t-distribution is skewed once shifted, that is not an even chance: the power
  of the two-sided 95% t-test at the MDE is about 61% with 3 seeds (:func:`power`). A paper
  effect below it cannot be told apart from seed noise with ``n`` seeds: the claim is "not
  testable at this scale";
* the effect detected with a given power (:func:`mde_at_power`, 80% by convention): the true
  effect ``delta`` at which the noncentral t with ``n - 1`` degrees of freedom and
  noncentrality ``delta sqrt(n) / sigma`` exceeds ``t_{0.975, n-1}`` with that probability
  (about 4.5 points for an accuracy difference over 3 seeds, against the MDE's 3.4);
* the standardised effect of measured paired values, ``d = mean / s`` (:func:`standardised`),
  the effect in units of its own seed spread, comparable across quantities of different scales.

The assumed ``sigma`` of each kind of quantity is :data:`SEED_SD` (measured on the earlier
Part A runs, see there).
"""

from __future__ import annotations

import math
import statistics
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
    mean = statistics.mean(values)
    sd = statistics.stdev(values, mean)
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


def power(effect: float, sigma: float, n: int, confidence: float = CONFIDENCE) -> float:
    """Probability that the two-sided ``confidence`` t-interval of ``n`` paired values with
    true mean ``effect`` and spread ``sigma`` lies above 0: ``P(T' > t_{(1+c)/2, n-1})`` with
    ``T'`` noncentral t (``n - 1`` degrees of freedom, noncentrality ``effect sqrt(n) /
    sigma``; scipy.stats.nct). The interval's far side (below 0) is neglected.

    Raises:
        ValueError: when ``n < 2`` or ``sigma <= 0``.
    """
    if n < 2:
        raise ValueError(f"power needs at least 2 seeds, got {n}")
    if sigma <= 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    from scipy.stats import nct

    critical = t_quantile((1.0 + confidence) / 2.0, n - 1)
    return float(nct.sf(critical, n - 1, effect * math.sqrt(n) / sigma))


def mde_at_power(sigma: float, n: int, target: float = 0.8,
                 confidence: float = CONFIDENCE) -> float:
    """The true effect detected (interval above 0) with probability ``target`` by ``n``
    paired seeds of spread ``sigma`` (:func:`power` solved for the effect).

    Raises:
        ValueError: when ``n < 2``, ``sigma <= 0`` or ``target`` is not in (0, 1).
    """
    if not 0.0 < target < 1.0:
        raise ValueError(f"power must be in (0, 1), got {target}")
    power(0.0, sigma, n, confidence)  # argument checks
    from scipy.optimize import brentq

    return float(brentq(lambda effect: power(effect, sigma, n, confidence) - target,
                        0.0, 100.0 * sigma))


def standardised(values: Sequence[float]) -> float:
    """``mean / s`` of paired values (``s``: sample standard deviation, ``n - 1``): the effect
    in units of its seed spread (Cohen's d of paired differences); +/-inf when ``s`` is 0.

    Raises:
        ValueError: with fewer than 2 values.
    """
    n = len(values)
    if n < 2:
        raise ValueError(f"a standardised effect needs at least 2 values, got {n}")
    mean = statistics.mean(values)
    sd = statistics.stdev(values, mean)
    if sd == 0:
        return math.copysign(math.inf, mean) if mean else 0.0
    return mean / sd
