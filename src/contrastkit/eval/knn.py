"""Accuracies of class scores, and of the weighted kNN vote of frozen features (Wu et al. 2018).

The neighbour search and the vote themselves (:func:`~contrastkit.knn.knn_predict`,
:func:`~contrastkit.knn.nearest_neighbors`) are :mod:`contrastkit.knn`, below both evaluation
and the pretraining engine's kNN monitor.
"""

from __future__ import annotations

import torch
from torch import Tensor

from contrastkit.checks import check_labels
from contrastkit.knn import knn_predict

__all__ = ["knn_accuracy", "topk_accuracy"]


def topk_accuracy(scores: Tensor, labels: Tensor, ks: tuple[int, ...] = (1, 5)) -> dict[str, float]:
    """Fraction of rows whose label is among the ``k`` highest scores, for each ``k``.

    A ``k`` that is not smaller than the number of classes (``scores.shape[1]``) is left out:
    every label is among the top ``k`` then, so its accuracy is 1 whatever the model (top-5 of
    4 classes). ``k = 1`` is always reported.

    Returns:
        ``{"top1": ..., "top5": ...}`` fractions in [0, 1].
    """
    check_labels("labels", labels, scores.shape[0], "scores")
    labels = labels.to(scores.device)
    out = {}
    for k in ks:
        if k > 1 and k >= scores.shape[1]:
            continue
        top = torch.topk(scores, k, dim=1).indices
        out[f"top{k}"] = float((top == labels[:, None]).any(dim=1).double().mean())
    return out


def knn_accuracy(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    **knn_kwargs: object,
) -> dict[str, float]:
    """Top-1 and top-5 accuracy (fractions) of :func:`~contrastkit.knn.knn_predict`.

    Top-1 is the accuracy of ``argmax`` of the class scores; top-5 asks whether the label is
    among the 5 highest class scores (Wu et al. 2018).

    Args:
        train_features, train_labels, test_features: as in
            :func:`~contrastkit.knn.knn_predict`.
        test_labels: ``(N_test,)`` integer labels.
        **knn_kwargs: keyword arguments of :func:`~contrastkit.knn.knn_predict` (k,
            temperature, metric, ...).

    Returns:
        ``{"top1": float, "top5": float}``.
    """
    check_labels("test_labels", test_labels, test_features.shape[0], "test_features")
    _, scores = knn_predict(train_features, train_labels, test_features, **knn_kwargs)  # type: ignore[arg-type]
    return topk_accuracy(scores, test_labels, (1, 5))
