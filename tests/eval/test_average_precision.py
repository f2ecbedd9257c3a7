"""VOC average precision (contrastkit.eval.average_precision) against scikit-learn and by hand."""

from __future__ import annotations

import numpy as np
import pytest

from contrastkit.eval.average_precision import ap_all_point, ap_interpolated, ap_voc07

# ranked list: + - - + +  ->  P = 1, 1/2, 1/3, 1/2, 3/5;  R = 1/3, 1/3, 1/3, 2/3, 1
SCORES = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
LABELS = np.array([1, -1, -1, 1, 1])


def test_eleven_point_ap_by_hand():
    # t = 0, .1, .2, .3: max P over R >= t is 1; t = .4 ... 1: max(1/2, 3/5) = 3/5
    assert ap_voc07(SCORES, LABELS) == pytest.approx((4 * 1.0 + 7 * 0.6) / 11, abs=1e-12)


def test_all_point_and_interpolated_ap_by_hand():
    assert ap_all_point(SCORES, LABELS) == pytest.approx((1.0 + 0.5 + 0.6) / 3, abs=1e-12)
    # the envelope lifts the precision at recall 2/3 from 1/2 to 3/5
    assert ap_interpolated(SCORES, LABELS) == pytest.approx((1.0 + 0.6 + 0.6) / 3, abs=1e-12)


def test_eleven_point_levels_are_exact_tenths():
    # 10 positives ranked 1st, 2nd, 3rd, then a negative, then the 7 others: recall 3/10
    # reaches the level 0.3 with precision 1 (np.arange(0, 1.1, 0.1)[3] > 0.3 would miss it)
    labels = np.array([1, 1, 1, -1] + [1] * 7)
    scores = -np.arange(labels.size, dtype=float)
    expected = (4 * 1.0 + 7 * (10 / 11)) / 11
    assert ap_voc07(scores, labels) == pytest.approx(expected, abs=1e-12)


def test_difficult_images_are_left_out():
    scores = np.r_[SCORES, 10.0, -10.0]
    labels = np.r_[LABELS, 0, 0]
    for ap in (ap_voc07, ap_all_point, ap_interpolated):
        assert ap(scores, labels) == pytest.approx(ap(SCORES, LABELS), abs=1e-15)


@pytest.mark.parametrize("seed", range(5))
def test_all_point_ap_equals_scikit_learn(seed):
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(seed)
    labels = rng.choice([1, -1, 0], size=200, p=[0.3, 0.6, 0.1])
    scores = np.round(rng.normal(size=200) + labels, 1)  # rounding makes ties
    keep = labels != 0
    expected = metrics.average_precision_score(labels[keep] == 1, scores[keep])
    assert ap_all_point(scores, labels) == pytest.approx(expected, abs=1e-12)
    assert ap_interpolated(scores, labels) >= ap_all_point(scores, labels) - 1e-12


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="no positive"):
        ap_voc07(SCORES, -np.ones(5, dtype=int))
    with pytest.raises(ValueError, match="labels must be"):
        ap_voc07(SCORES, np.array([1, 2, 1, 1, 1]))
    with pytest.raises(ValueError, match="entries"):
        ap_voc07(SCORES, LABELS[:3])
