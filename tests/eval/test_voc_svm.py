"""One-vs-rest VOC07 SVMs, cost selection and the low-shot sampler (contrastkit.eval.voc_svm)."""

from __future__ import annotations

import numpy as np
import pytest

from contrastkit.eval.voc_svm import SVMProtocol, choose_cost, sample_low_shot, voc07_svm

pytest.importorskip("sklearn")

FAST = SVMProtocol(costs=(0.1, 1.0, 10.0), folds=3)


def _multilabel(n: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Features whose coordinate c is +1/-1 with class c's label (plus noise), some difficult."""
    rng = np.random.default_rng(seed)
    present = rng.random((n, classes)) < 0.4
    present[:classes, :] = np.eye(classes, dtype=bool)  # every class has positives
    targets = np.where(present, 1, -1).astype(np.int8)
    features = np.where(present, 1.0, -1.0) + 0.05 * rng.normal(size=(n, classes))
    features = np.c_[features, rng.normal(size=(n, 3)) * 0.05]
    targets[rng.random((n, classes)) < 0.05] = 0  # difficult
    return features, targets


def test_separable_features_reach_map_one():
    xtr, ttr = _multilabel(60, 3, 0)
    xte, tte = _multilabel(40, 3, 1)
    out = voc07_svm(xtr, ttr, xte, tte, protocol=FAST, seed=0)
    assert out["map_voc07"] == pytest.approx(1.0)
    assert out["map_all_point"] == pytest.approx(1.0)
    assert out["scores"].shape == (40, 3)
    assert all(c in FAST.costs for c in out["costs"])


def test_low_shot_draws_have_exact_per_class_counts():
    _, targets = _multilabel(120, 4, 2)
    for shots in (1, 3, 5):
        mask = sample_low_shot(targets, shots, seed=7)
        positives = (mask & (targets == 1)).sum(axis=0)
        negatives = (mask & (targets == -1)).sum(axis=0)
        assert positives.tolist() == [shots] * 4  # k positives
        assert negatives.tolist() == [3 * shots] * 4  # (C - 1) k negatives
        assert not (mask & (targets == 0)).any()  # never a difficult image
    assert (sample_low_shot(targets, 3, 7) == sample_low_shot(targets, 3, 7)).all()
    assert (sample_low_shot(targets, 3, 7) != sample_low_shot(targets, 3, 8)).any()


def test_low_shot_svm_trains_on_the_draw_only():
    xtr, ttr = _multilabel(120, 3, 3)
    xte, tte = _multilabel(30, 3, 4)
    mask = sample_low_shot(ttr, 4, seed=0)
    out = voc07_svm(xtr, ttr, xte, tte, protocol=FAST, seed=0, subset=mask)
    assert out["num_positives"] == [4, 4, 4] and out["num_negatives"] == [8, 8, 8]
    full = voc07_svm(xtr, ttr, xte, tte, protocol=FAST, seed=0)
    assert full["num_positives"] == [int((ttr[:, c] == 1).sum()) for c in range(3)]
    assert full["num_negatives"] == [int((ttr[:, c] == -1).sum()) for c in range(3)]


def test_too_few_positives_names_the_class():
    targets = np.array([[1, 1], [1, -1], [1, 0], [-1, -1], [-1, -1], [-1, -1]])
    with pytest.raises(ValueError, match="class dog has 1 positive"):
        sample_low_shot(targets, 2, 0, ["cat", "dog"])


def test_cost_is_chosen_without_the_test_split():
    xtr, ttr = _multilabel(60, 2, 6)
    xte, tte = _multilabel(30, 2, 7)
    a = voc07_svm(xtr, ttr, xte, tte, protocol=FAST, seed=0)
    b = voc07_svm(xtr, ttr, xte, -tte, protocol=FAST, seed=0)  # test labels flipped
    assert a["costs"] == b["costs"] and a["cv_ap"] == b["cv_ap"]
    assert b["map_voc07"] < a["map_voc07"]


def test_cost_selection_is_the_best_mean_held_out_ap():
    from sklearn.model_selection import StratifiedKFold
    from sklearn.svm import LinearSVC

    from contrastkit.eval.average_precision import ap_voc07

    rng = np.random.default_rng(0)
    y = np.where(rng.random(60) < 0.4, 1, -1)
    x = np.c_[y + 1.5 * rng.normal(size=60), rng.normal(size=(60, 4))]
    protocol = SVMProtocol(costs=(1e-3, 0.1, 10.0), folds=3)
    cost, means = choose_cost(x, y, protocol, seed=3)
    for c, mean in zip(protocol.costs, means, strict=True):  # brute force, fold by fold
        folds = StratifiedKFold(3, shuffle=True, random_state=3).split(x, y)
        aps = [ap_voc07(LinearSVC(C=c, class_weight={1: 2.0, -1: 1.0}, dual=True, tol=1e-4,
                                  max_iter=2000, random_state=3).fit(x[a], y[a])
                        .decision_function(x[b]), y[b]) for a, b in folds]
        assert mean == pytest.approx(np.mean(aps), abs=1e-12)
    assert cost == protocol.costs[int(np.argmax(means))]


def test_parallel_classes_give_the_same_result():
    xtr, ttr = _multilabel(40, 3, 8)
    xte, tte = _multilabel(20, 3, 9)
    xtr = xtr + np.random.default_rng(0).normal(0, 1.0, xtr.shape)  # not separable
    from joblib import parallel_config

    one = voc07_svm(xtr, ttr, xte, tte, protocol=FAST, seed=0, jobs=1)
    # threads would share liblinear's random state (one in 3 runs differed by 1e-5): the
    # classes go to processes even where the caller's joblib context asks for threads
    with parallel_config(backend="threading"):
        two = voc07_svm(xtr, ttr, xte, tte, protocol=FAST, seed=0, jobs=2)
    np.testing.assert_array_equal(one["scores"], two["scores"])
    assert one["costs"] == two["costs"] and one["ap_voc07"] == two["ap_voc07"]
