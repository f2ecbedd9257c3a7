"""Paired percentile bootstrap of an accuracy difference (SINCERE App. M, Foody 2009)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from contrastkit.eval import bootstrap_accuracy_difference, significance_verdict


def simulate(rng, n, p_a, p_b, classes=10):
    labels = rng.integers(0, classes, n)
    wrong = (labels + 1) % classes
    pred_a = np.where(rng.random(n) < p_a, labels, wrong)
    pred_b = np.where(rng.random(n) < p_b, labels, wrong)
    return pred_a, pred_b, labels


def test_difference_is_accuracy_difference_and_deterministic():
    rng = np.random.default_rng(0)
    a, b, y = simulate(rng, 500, 0.8, 0.7)
    diff, low, high = bootstrap_accuracy_difference(a, b, y, n_resamples=300, seed=1)
    assert diff == pytest.approx((a == y).mean() - (b == y).mean())
    assert low < diff < high
    again = bootstrap_accuracy_difference(
        torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(y), n_resamples=300, seed=1
    )
    assert again == (diff, low, high)


def test_interval_covers_true_difference_in_simulation():
    rng = np.random.default_rng(42)
    true_diff = 0.80 - 0.75
    covered = 0
    for sim in range(100):
        a, b, y = simulate(rng, 400, 0.80, 0.75)
        _, low, high = bootstrap_accuracy_difference(a, b, y, n_resamples=200, seed=sim)
        covered += low <= true_diff <= high
    assert covered >= 88  # nominal 95%; binomial sd about 2.2 simulations


def test_width_matches_normal_approximation():
    rng = np.random.default_rng(7)
    a, b, y = simulate(rng, 2000, 0.7, 0.7)
    d = (a == y).astype(float) - (b == y).astype(float)
    _, low, high = bootstrap_accuracy_difference(a, b, y, n_resamples=2000, seed=0)
    expected = 2 * 1.96 * d.std() / np.sqrt(len(d))
    assert high - low == pytest.approx(expected, rel=0.1)
    _, low90, high90 = bootstrap_accuracy_difference(
        a, b, y, n_resamples=2000, confidence=0.9, seed=0
    )
    assert high90 - low90 < high - low


def test_paired_resampling_identical_models_give_zero_width():
    rng = np.random.default_rng(1)
    a, _, y = simulate(rng, 300, 0.6, 0.6)
    assert bootstrap_accuracy_difference(a, a.copy(), y, n_resamples=100) == (0.0, 0.0, 0.0)


def test_blocked_resampling_matches_unblocked(monkeypatch):
    import contrastkit.eval.bootstrap as bootstrap

    rng = np.random.default_rng(2)
    a, b, y = simulate(rng, 100, 0.7, 0.6)
    full = bootstrap.bootstrap_accuracy_difference(a, b, y, n_resamples=50, seed=3)
    monkeypatch.setattr(bootstrap, "_BLOCK_ENTRIES", 700)  # 7 resamples per block
    assert bootstrap.bootstrap_accuracy_difference(a, b, y, n_resamples=50, seed=3) == full


def test_significance_verdict():
    assert significance_verdict(0.01, 0.03) == "significant"
    assert significance_verdict(-0.03, -0.001) == "significant"
    assert significance_verdict(-0.01, 0.02) == "not significant"
    assert significance_verdict(0.0, 0.02) == "not significant"
    with pytest.raises(ValueError, match="low"):
        significance_verdict(0.2, 0.1)


def test_bad_inputs():
    y = np.arange(5)
    with pytest.raises(ValueError, match="same length"):
        bootstrap_accuracy_difference(y, y[:4], y)
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_accuracy_difference(y, y, y, confidence=1.5)
    with pytest.raises(ValueError, match="pred_a must hold integer"):
        bootstrap_accuracy_difference(y.astype(float), y, y)
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_accuracy_difference(y, y, y, n_resamples=0)


def test_single_accuracy_interval_matches_a_resampling_loop():
    """bootstrap_accuracy against a loop written from its definition (same generator draws)."""
    from contrastkit.eval import bootstrap_accuracy

    rng = np.random.default_rng(3)
    pred, _, y = simulate(rng, 300, 0.7, 0.7)
    acc, low, high = bootstrap_accuracy(pred, y, n_resamples=200, seed=5)
    assert acc == pytest.approx((pred == y).mean())
    draw = np.random.default_rng(5)
    idx = draw.integers(0, 300, size=(200, 300))  # one block: 200 x 300 entries
    resampled = [float((pred[row] == y[row]).mean()) for row in idx]
    assert (low, high) == pytest.approx(tuple(np.quantile(resampled, [0.025, 0.975])))
    assert low < acc < high


def test_single_accuracy_width_matches_binomial_error():
    from contrastkit.eval import bootstrap_accuracy

    rng = np.random.default_rng(8)
    pred, _, y = simulate(rng, 4000, 0.6, 0.6)
    acc, low, high = bootstrap_accuracy(pred, y, n_resamples=2000)
    assert high - low == pytest.approx(2 * 1.96 * np.sqrt(acc * (1 - acc) / 4000), rel=0.1)


def test_single_accuracy_rejects_bad_input():
    from contrastkit.eval import bootstrap_accuracy

    with pytest.raises(ValueError, match="same length"):
        bootstrap_accuracy(np.zeros(3, dtype=int), np.zeros(4, dtype=int))
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_accuracy(np.zeros(3, dtype=int), np.zeros(3, dtype=int), n_resamples=0)
    with pytest.raises(ValueError, match="empty"):
        bootstrap_accuracy(np.zeros(0, dtype=int), np.zeros(0, dtype=int))


def test_predictions_are_written_compressed_and_read_back(tmp_path):
    """``predictions.npz`` is a deflated zip (a study records thousands of them) and reads back
    exactly, int64."""
    import json
    import zipfile

    import numpy as np

    from contrastkit.eval.report import PREDICTIONS, RESULTS_JSON, load_run, write_predictions

    rng = np.random.default_rng(0)
    pred, labels = rng.integers(0, 10, 10_000), rng.integers(0, 10, 10_000)
    path = write_predictions(tmp_path / PREDICTIONS, pred, labels)
    with zipfile.ZipFile(path) as archive:
        assert {i.compress_type for i in archive.infolist()} == {zipfile.ZIP_DEFLATED}
    (tmp_path / RESULTS_JSON).write_text(json.dumps({"metrics": {}}))
    _, arrays = load_run(tmp_path)
    assert arrays["pred"].dtype == np.int64 and (arrays["pred"] == pred).all()
    assert (arrays["labels"] == labels).all()
