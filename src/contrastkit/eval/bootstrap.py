"""Paired bootstrap confidence interval of an accuracy difference.

SINCERE (App. M, Tables 2 and 6) calls a difference between two models significant when the
95% confidence interval of the accuracy difference from 1,000 test-set bootstrap iterations
(Foody, 2009) excludes zero.
"""

from __future__ import annotations

import numpy as np
from torch import Tensor

# Resampled index entries held at once (int64): 2**22 entries = 32 MiB.
_BLOCK_ENTRIES = 2**22


def _to_numpy_labels(name: str, x: Tensor | np.ndarray, runs: bool = False) -> np.ndarray:
    """``x`` as a numpy integer array: 1-D, or 2-D (one row per run) when ``runs``."""
    if isinstance(x, Tensor):
        x = x.detach().cpu().numpy()
    if not isinstance(x, np.ndarray):
        raise ValueError(f"{name} must be a torch.Tensor or numpy array, got {type(x).__name__}")
    if x.ndim != 1 and not (runs and x.ndim == 2 and x.shape[0] > 0):
        raise ValueError(f"{name} must be 1-D{' or (runs, n)' if runs else ''}, got shape "
                         f"{x.shape}")
    if not np.issubdtype(x.dtype, np.integer):
        raise ValueError(f"{name} must hold integer labels, got dtype {x.dtype}")
    return x


def bootstrap_accuracy_difference(
    pred_a: Tensor | np.ndarray,
    pred_b: Tensor | np.ndarray,
    labels: Tensor | np.ndarray,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Percentile bootstrap interval of ``acc_a - acc_b`` on the same test set (paired).

    With ``d_i = 1[a_i = y_i] - 1[b_i = y_i]`` per test example, the observed difference is
    ``mean(d)``. Each of ``n_resamples`` resamples draws ``n`` test indices with replacement
    (the same indices for both models: a paired bootstrap) and recomputes ``mean(d)``; the
    interval is the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of those
    resampled differences (numpy's default linear interpolation).

    Several runs of each model (seeds, ``(S, n)`` predictions) enter through their mean
    correctness per example, ``d_i = mean_s 1[a_si = y_i] - mean_s 1[b_si = y_i]``: ``mean(d)``
    is then the difference of the two mean accuracies over the seeds, and each resample keeps
    an example's runs together (the interval reflects the test set's sampling, the seeds
    averaged).

    Args:
        pred_a: ``(n,)`` predictions of model A, or ``(S, n)``: one row per run.
        pred_b: ``(n,)`` or ``(S', n)`` predictions of model B.
        labels: ``(n,)`` true labels.
        n_resamples: number of bootstrap resamples.
        confidence: interval coverage in (0, 1).
        seed: seed of the numpy generator (the result is deterministic given the seed).

    Returns:
        ``(difference, low, high)`` as fractions (``0.01`` is one percentage point).

    Raises:
        ValueError: on different lengths, empty inputs, non-integer labels or bad options.
    """
    a = _to_numpy_labels("pred_a", pred_a, runs=True)
    b = _to_numpy_labels("pred_b", pred_b, runs=True)
    y = _to_numpy_labels("labels", labels)
    if not a.shape[-1] == b.shape[-1] == y.shape[0]:
        raise ValueError(
            f"pred_a, pred_b and labels must have the same length, got {a.shape[-1]}, "
            f"{b.shape[-1]} and {y.shape[0]}"
        )
    correct_a = (a == y).astype(np.float64).reshape(-1, y.shape[0]).mean(axis=0)
    correct_b = (b == y).astype(np.float64).reshape(-1, y.shape[0]).mean(axis=0)
    return _percentile_bootstrap(correct_a - correct_b, n_resamples, confidence, seed)


def bootstrap_accuracy(
    pred: Tensor | np.ndarray,
    labels: Tensor | np.ndarray,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Percentile bootstrap interval of one model's accuracy on its test set.

    With ``c_i = 1[pred_i = y_i]``, the accuracy is ``mean(c)``; each of ``n_resamples``
    resamples draws ``n`` test indices with replacement and recomputes ``mean(c)``; the interval
    is the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the resampled
    accuracies. It measures the test-set sampling error only (not the seed-to-seed spread of
    training).

    Args:
        pred: ``(n,)`` predictions.
        labels: ``(n,)`` true labels.
        n_resamples: number of bootstrap resamples.
        confidence: interval coverage in (0, 1).
        seed: seed of the numpy generator.

    Returns:
        ``(accuracy, low, high)`` as fractions.

    Raises:
        ValueError: on different lengths, empty inputs, non-integer labels or bad options.
    """
    p = _to_numpy_labels("pred", pred)
    y = _to_numpy_labels("labels", labels)
    if p.shape[0] != y.shape[0]:
        raise ValueError(f"pred and labels must have the same length, got {p.shape[0]} and "
                         f"{y.shape[0]}")
    return _percentile_bootstrap((p == y).astype(np.float64), n_resamples, confidence, seed)


def _percentile_bootstrap(values: np.ndarray, n_resamples: int, confidence: float,
                          seed: int) -> tuple[float, float, float]:
    """``(mean, low, high)``: percentile interval of the mean of ``values`` over resamples."""
    n = values.shape[0]
    if n == 0:
        raise ValueError("labels is empty")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive int, got {n_resamples!r}")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK_ENTRIES // n)
    resampled = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, block):
        rows = min(block, n_resamples - start)
        idx = rng.integers(0, n, size=(rows, n))
        resampled[start : start + rows] = values[idx].mean(axis=1)
    tail = (1.0 - float(confidence)) / 2.0
    low, high = np.quantile(resampled, [tail, 1.0 - tail])
    return float(values.mean()), float(low), float(high)


def significance_verdict(low: float, high: float) -> str:
    """``"significant"`` when the interval ``[low, high]`` excludes 0, else ``"not significant"``.

    An interval touching 0 (``low == 0`` or ``high == 0``) does not exclude it.
    """
    if low > high:
        raise ValueError(f"low ({low}) must not exceed high ({high})")
    return "significant" if low > 0.0 or high < 0.0 else "not significant"

