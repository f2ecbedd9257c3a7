"""Argument validation shared by the losses and the evaluation of frozen features.

Each check raises ``ValueError`` naming the offending argument, so a user sees *which*
input is wrong, not a shape error deep inside a matrix product.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from contrastkit.hot_path import in_hot_path

__all__ = [
    "check_batch_has_negatives",
    "check_embedding_layout",
    "check_embeddings",
    "check_features",
    "check_labels",
    "check_non_negative_float",
    "check_positive_float",
    "check_same_dim",
    "check_same_dtype",
    "check_same_shape",
    "check_unit_interval",
    "resolve_num_classes",
]

def check_embeddings(name: str, x: Tensor, *, ndim: int | tuple[int, ...] = 2) -> None:
    """Check that ``x`` is a floating tensor of the expected rank with finite values.

    Raises:
        ValueError: if ``x`` is not a tensor, has the wrong rank, is empty, is not floating
            point or contains NaN/Inf. The message names ``name``.
    """
    check_embedding_layout(name, x, ndim=ndim)
    if not in_hot_path() and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or Inf values")


def check_same_shape(name_a: str, a: Tensor, name_b: str, b: Tensor) -> None:
    """Raise ``ValueError`` unless ``a`` and ``b`` have the same shape."""
    if a.shape != b.shape:
        raise ValueError(
            f"{name_a} and {name_b} must have the same shape, got {tuple(a.shape)} and "
            f"{tuple(b.shape)}"
        )


def check_same_dtype(name_a: str, a: Tensor, name_b: str, b: Tensor) -> None:
    """Raise ``ValueError`` unless ``a`` and ``b`` have the same dtype."""
    if a.dtype != b.dtype:
        raise ValueError(f"{name_b} must have the dtype of {name_a} ({a.dtype}), got {b.dtype}")


def check_same_dim(name_a: str, a: Tensor, name_b: str, b: Tensor) -> None:
    """Raise ``ValueError`` unless the last (embedding) dimensions of ``a`` and ``b`` agree."""
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(
            f"{name_b} must have the embedding dimension of {name_a} ({a.shape[-1]}), got "
            f"{b.shape[-1]}"
        )


def check_positive_float(name: str, value: float) -> None:
    """Raise ``ValueError`` unless ``value`` is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value}")


def check_unit_interval(name: str, value: float) -> None:
    """Raise ``ValueError`` unless ``value`` lies in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")


def check_non_negative_float(name: str, value: float) -> None:
    """Raise ``ValueError`` unless ``value`` is a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value}")


def check_batch_has_negatives(name: str, x: Tensor, minimum: int = 2) -> None:
    """Raise ``ValueError`` when a batch is too small for in-batch negatives."""
    if x.shape[0] < minimum:
        raise ValueError(
            f"{name} has batch size {x.shape[0]}: this loss needs at least {minimum} samples "
            "so that every anchor has a negative"
        )


def check_embedding_layout(name: str, x: Tensor, *, ndim: int | tuple[int, ...] = 2) -> None:
    """``check_embeddings`` without the NaN/Inf scan.

    For callers that detect non-finite values more cheaply, e.g. from the row norms they
    compute anyway (a NaN or Inf entry makes its row norm non-finite); on a non-finite norm
    they should call :func:`check_embeddings` to report it.
    """
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    ndims = (ndim,) if isinstance(ndim, int) else ndim
    if x.dim() not in ndims:
        want = " or ".join(str(n) for n in ndims)
        raise ValueError(f"{name} must have {want} dimensions, got shape {tuple(x.shape)}")
    if x.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(x.shape)})")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating point tensor, got dtype {x.dtype}")


def check_features(name: str, x: Tensor) -> None:
    """Raise ``ValueError`` unless ``x`` is a finite floating ``(N, D)`` tensor (names ``name``)."""
    check_embeddings(name, x, ndim=2)


def check_labels(name: str, labels: Tensor, n: int, features_name: str) -> None:
    """Raise ``ValueError`` unless ``labels`` is a 1-D integer tensor of ``n`` values >= 0.

    Args:
        name: argument name used in messages.
        labels: the label tensor.
        n: number of feature rows the labels must match.
        features_name: name of the features argument, used in messages.
    """
    if not isinstance(labels, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(labels).__name__}")
    if labels.dim() != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(labels.shape)}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer tensor, got dtype {labels.dtype}")
    if labels.shape[0] != n:
        raise ValueError(
            f"{name} has {labels.shape[0]} labels but {features_name} has {n} rows: "
            "feature and label counts differ"
        )
    if n > 0 and int(labels.min()) < 0:
        raise ValueError(f"{name} contains negative labels (min {int(labels.min())})")


def resolve_num_classes(labels: Tensor, num_classes: int | None, name: str) -> int:
    """Number of classes: ``max(labels) + 1`` if ``num_classes`` is None, else checked.

    Raises:
        ValueError: if a label is >= ``num_classes`` or, when ``num_classes`` is given, a class in
            ``range(num_classes)`` has no sample in ``labels`` (an empty class).
    """
    top = int(labels.max()) + 1
    if num_classes is None:
        return top
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"num_classes must be a positive int, got {num_classes!r}")
    if top > num_classes:
        raise ValueError(f"{name} contains label {top - 1} >= num_classes={num_classes}")
    counts = torch.bincount(labels.cpu(), minlength=num_classes)
    empty = torch.nonzero(counts == 0).flatten().tolist()
    if empty:
        raise ValueError(
            f"{name} has no sample of class(es) {empty[:10]} (empty class with "
            f"num_classes={num_classes})"
        )
    return num_classes
