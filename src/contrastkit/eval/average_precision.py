"""Average precision of a ranking with "difficult" images left out (Pascal VOC).

Labels per image are ``1`` (positive), ``-1`` (negative) or ``0`` (difficult: left out of the
ranking, as the VOC devkit does; Everingham et al. 2010, sec. 4.2). The images are ranked by
decreasing score; images with equal scores form one threshold (as in scikit-learn), so that
precision ``P_i`` and recall ``R_i`` are taken at each distinct score ``s_i``:
``P_i = TP(s >= s_i) / #(s >= s_i)``, ``R_i = TP(s >= s_i) / #positives``.

* :func:`ap_voc07` -- the 11-point interpolated AP of VOC2007 (Everingham et al. 2010,
  eq. 1): ``AP = 1/11 sum_{t in {0, 0.1, ..., 1}} max_{i: R_i >= t} P_i`` (0 when no
  ``R_i >= t``); the SCE paper's Table 9 reports it ("the 11-point MAP for VOC2007").
  The levels are ``t = j / 10`` exactly, so a recall of 3/10 reaches the level 0.3.
* :func:`ap_all_point` -- the uninterpolated all-point AP ``sum_i (R_i - R_{i-1}) P_i``,
  ``R_0 = 0``: scikit-learn's ``average_precision_score``.
* :func:`ap_interpolated` -- the area under the monotone precision envelope,
  ``sum_i (R_i - R_{i-1}) max_{j >= i} P_j`` (the VOC2010 devkit's AP, and what the public
  SVM benchmark code of the PCL/ReSSL/FAIR lineage reports); it is ``>= ap_all_point``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ap_all_point", "ap_interpolated", "ap_voc07", "precision_recall"]


def precision_recall(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Precision and recall at each distinct score, highest first (difficult ``0`` left out).

    Args:
        scores: ``(N,)`` real scores.
        labels: ``(N,)`` in {1, -1, 0}.

    Raises:
        ValueError: for shapes that differ, other label values, non-finite scores or no
            positive image.
    """
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    if scores.shape != labels.shape:
        raise ValueError(f"scores has {scores.shape[0]} entries but labels has "
                         f"{labels.shape[0]}")
    if not np.isin(labels, (1, -1, 0)).all():
        raise ValueError("labels must be 1 (positive), -1 (negative) or 0 (difficult)")
    if not np.isfinite(scores).all():
        raise ValueError("scores must be finite")
    keep = labels != 0
    scores, positive = scores[keep], labels[keep] == 1
    if not positive.any():
        raise ValueError("no positive image: average precision is undefined")
    order = np.argsort(-scores, kind="stable")
    scores, positive = scores[order], positive[order]
    last = np.r_[np.flatnonzero(np.diff(scores) != 0), scores.shape[0] - 1]  # end of each tie
    tp = np.cumsum(positive)[last].astype(np.float64)
    seen = (last + 1).astype(np.float64)
    return tp / seen, tp / positive.sum()


def ap_voc07(scores: np.ndarray, labels: np.ndarray) -> float:
    """VOC2007 11-point interpolated AP (module docstring)."""
    precision, recall = precision_recall(scores, labels)
    total = 0.0
    for j in range(11):
        reached = recall >= j / 10
        total += float(precision[reached].max()) if reached.any() else 0.0
    return total / 11


def ap_all_point(scores: np.ndarray, labels: np.ndarray) -> float:
    """Uninterpolated all-point AP, ``sum_i (R_i - R_{i-1}) P_i`` (scikit-learn's)."""
    precision, recall = precision_recall(scores, labels)
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def ap_interpolated(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the monotone precision envelope (VOC2010 devkit; module docstring)."""
    precision, recall = precision_recall(scores, labels)
    envelope = np.maximum.accumulate(precision[::-1])[::-1]
    return float(np.sum(np.diff(np.r_[0.0, recall]) * envelope))
