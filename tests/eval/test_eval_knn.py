"""Weighted kNN against scikit-learn and brute-force loops written from Wu et al. (2018)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.neighbors import KNeighborsClassifier

from contrastkit.eval import knn_accuracy, knn_predict, nearest_neighbors

faiss = pytest.importorskip("faiss")





def clustered(n_train=400, n_test=150, dim=16, classes=5, spread=1.2, seed=0):
    """Gaussian clusters that overlap enough for kNN to make mistakes (no exact ties)."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, dim, generator=g)
    ytr = torch.randint(0, classes, (n_train,), generator=g)
    yte = torch.randint(0, classes, (n_test,), generator=g)
    xtr = centers[ytr] + spread * torch.randn(n_train, dim, generator=g)
    xte = centers[yte] + spread * torch.randn(n_test, dim, generator=g)
    return xtr, ytr, xte, yte


def brute_force_scores(xtr, ytr, xte, k, t, metric, weighting, classes):
    """Loop over queries: rank the bank in float64, vote with the documented weights."""
    xtr, xte = xtr.double(), xte.double()
    if metric == "cosine":
        xtr = xtr / xtr.norm(dim=1, keepdim=True)
        xte = xte / xte.norm(dim=1, keepdim=True)
    scores = torch.zeros(xte.shape[0], classes, dtype=torch.float64)
    for q in range(xte.shape[0]):
        if metric == "cosine":
            values = xtr @ xte[q]
            order = torch.argsort(values, descending=True)[:k]
        else:
            values = (xtr - xte[q]).norm(dim=1)
            order = torch.argsort(values)[:k]
        for i in order.tolist():
            if weighting == "uniform":
                w = 1.0
            elif metric == "cosine":
                w = math.exp(float(values[i]) / t)
            else:
                w = math.exp(-float(values[i]) / t)
            scores[q, int(ytr[i])] += w
    return scores


@pytest.mark.parametrize("backend", ["faiss", "torch"])
@pytest.mark.parametrize("k", [1, 5])
def test_l2_uniform_matches_sklearn(backend, k):
    xtr, ytr, xte, _ = clustered()
    pred, scores = knn_predict(xtr, ytr, xte, k=k, metric="l2", backend=backend)
    ref = KNeighborsClassifier(n_neighbors=k, algorithm="brute").fit(xtr.numpy(), ytr.numpy())
    np.testing.assert_array_equal(pred.numpy(), ref.predict(xte.numpy()))
    assert torch.all(scores.sum(dim=1) == k)  # one vote per neighbour


@pytest.mark.parametrize("backend", ["faiss", "torch"])
@pytest.mark.parametrize(
    ("metric", "weighting", "t"),
    [("cosine", "exp", 0.1), ("cosine", "exp", 0.5), ("l2", "exp", 2.0), ("cosine", "uniform", 1)],
)
def test_weighted_vote_matches_brute_force_loop(backend, metric, weighting, t):
    xtr, ytr, xte, _ = clustered(n_train=200, n_test=40)
    pred, scores = knn_predict(
        xtr, ytr, xte, k=20, temperature=t, metric=metric, weighting=weighting, backend=backend
    )
    ref = brute_force_scores(xtr, ytr, xte, 20, t, metric, weighting, 5)
    torch.testing.assert_close(scores.double(), ref, rtol=1e-4, atol=1e-5)
    assert torch.equal(pred, ref.argmax(dim=1))


def test_default_weighting_is_exp_for_cosine_and_uniform_for_l2():
    xtr, ytr, xte, _ = clustered(n_train=100, n_test=10)
    _, s_cos = knn_predict(xtr, ytr, xte, k=7, temperature=0.1)
    _, s_exp = knn_predict(xtr, ytr, xte, k=7, temperature=0.1, weighting="exp")
    _, s_l2 = knn_predict(xtr, ytr, xte, k=7, metric="l2")
    assert torch.equal(s_cos, s_exp)
    assert torch.all(s_l2.sum(dim=1) == 7)


def test_faiss_and_torch_agree_exactly():
    xtr, ytr, xte, _ = clustered(n_train=2000, n_test=300, dim=32, classes=10, spread=2.0)
    for metric in ("cosine", "l2"):
        v_f, i_f = nearest_neighbors(xtr, xte, 50, metric=metric, backend="faiss")
        v_t, i_t = nearest_neighbors(xtr, xte, 50, metric=metric, backend="torch")
        assert torch.equal(i_f, i_t)
        torch.testing.assert_close(v_f, v_t, rtol=1e-5, atol=1e-5)
        p_f, _ = knn_predict(xtr, ytr, xte, k=50, metric=metric, backend="faiss")
        p_t, _ = knn_predict(xtr, ytr, xte, k=50, metric=metric, backend="torch")
        assert torch.equal(p_f, p_t)


@pytest.mark.parametrize("backend", ["faiss", "torch"])
def test_chunked_equals_unchunked(backend):
    xtr, ytr, xte, _ = clustered(n_train=500, n_test=123)
    p_full, s_full = knn_predict(xtr, ytr, xte, k=30, backend=backend, chunk_size=10_000)
    p_chunk, s_chunk = knn_predict(xtr, ytr, xte, k=30, backend=backend, chunk_size=17)
    assert torch.equal(p_full, p_chunk)
    torch.testing.assert_close(s_full, s_chunk, rtol=1e-5, atol=1e-4)


def test_neighbours_sorted_and_nearest_is_self():
    xtr, _, _, _ = clustered(n_train=100)
    values, idx = nearest_neighbors(xtr, xtr[:20], 5, backend="torch")
    assert torch.equal(idx[:, 0], torch.arange(20))
    assert torch.all(values[:, :-1] >= values[:, 1:])
    dist, idx2 = nearest_neighbors(xtr, xtr[:20], 5, metric="l2", backend="torch")
    assert torch.equal(idx2[:, 0], torch.arange(20))
    assert torch.all(dist[:, :-1] <= dist[:, 1:])


def test_knn_accuracy_top1_top5():
    xtr, ytr, xte, yte = clustered(n_train=300, n_test=100, classes=8, spread=1.5)
    pred, scores = knn_predict(xtr, ytr, xte, k=10, backend="torch")
    acc = knn_accuracy(xtr, ytr, xte, yte, k=10, backend="torch")
    assert acc["top1"] == pytest.approx(float((pred == yte).double().mean()))
    top5 = scores.topk(5, dim=1).indices
    manual5 = np.mean([int(yte[i]) in top5[i].tolist() for i in range(len(yte))])
    assert acc["top5"] == pytest.approx(manual5)
    assert 0.3 < acc["top1"] < acc["top5"] < 1.0


def test_class_score_tie_goes_to_smallest_class():
    xtr = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    ytr = torch.tensor([1, 0])
    xte = torch.tensor([[1.0, 1.0]])  # equidistant: one vote each
    pred, _ = knn_predict(xtr, ytr, xte, k=2, metric="l2")
    assert int(pred) == 0


def test_num_classes_extends_scores():
    xtr, ytr, xte, _ = clustered(n_train=50, n_test=5, classes=3)
    _, scores = knn_predict(xtr, ytr, xte, k=3, num_classes=3)
    assert scores.shape == (5, 3)


def test_bad_inputs_raise_named_errors():
    xtr, ytr, xte, _ = clustered(n_train=50, n_test=5, classes=3)
    with pytest.raises(ValueError, match="train_labels has 49 labels"):
        knn_predict(xtr, ytr[:-1], xte, k=3)
    with pytest.raises(ValueError, match="larger than the bank"):
        knn_predict(xtr, ytr, xte, k=51)
    with pytest.raises(ValueError, match="empty class"):
        knn_predict(xtr, ytr, xte, k=3, num_classes=4)
    nan = xte.clone()
    nan[0, 0] = float("nan")
    with pytest.raises(ValueError, match="test_features contains NaN"):
        knn_predict(xtr, ytr, nan, k=3)
    with pytest.raises(ValueError, match="metric"):
        knn_predict(xtr, ytr, xte, k=3, metric="cos")
    with pytest.raises(ValueError, match="embedding dimension"):
        knn_predict(xtr, ytr, xte[:, :4], k=3)
    with pytest.raises(ValueError, match="test_labels has 4 labels"):
        knn_accuracy(xtr, ytr, xte, ytr[:4], k=3)
    with pytest.raises(ValueError, match="integer"):
        knn_predict(xtr, ytr.float(), xte, k=3)
