"""Nearest-neighbour retrieval recall (SCE, Denize et al. 2023, Sec. 4.2 "Video retrieval",
Table 19)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from contrastkit.checks import check_features, check_labels, check_same_dim
from contrastkit.knn import Backend, nearest_neighbors


def retrieval_recall(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    ks: Sequence[int] = (1, 5, 10),
    *,
    backend: Backend = "auto",
    chunk_size: int | None = None,
) -> dict[str, float]:
    """Recall@k of cosine retrieval from the test set into the training set.

    Denize et al. 2023 (Table 19) query, for each test video, the ``N`` nearest training videos
    by cosine similarity and report ``R@N``: a query is a hit when at least one of its ``N`` nearest
    neighbours shares its label,
    ``R@k = (1 / N_test) sum_q 1[exists i in N_k(q): y_i = y_q]``.

    Args:
        train_features: ``(N_train, D)`` gallery (L2-normalised inside).
        train_labels: ``(N_train,)`` integer labels.
        test_features: ``(N_test, D)`` queries (L2-normalised inside).
        test_labels: ``(N_test,)`` integer labels.
        ks: the values of ``k``, each ``<= N_train``.
        backend: neighbour search backend (see :func:`contrastkit.eval.knn.nearest_neighbors`).
        chunk_size: queries per chunk.

    Returns:
        ``{"recall@1": ..., "recall@5": ..., ...}`` fractions in [0, 1].

    Raises:
        ValueError: on mismatched counts, NaN features, empty ``ks`` or ``k`` larger than the bank.
    """
    check_features("train_features", train_features)
    check_features("test_features", test_features)
    check_same_dim("train_features", train_features, "test_features", test_features)
    check_labels("train_labels", train_labels, train_features.shape[0], "train_features")
    check_labels("test_labels", test_labels, test_features.shape[0], "test_features")
    ks = tuple(ks)
    if not ks:
        raise ValueError("ks must contain at least one k")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"ks must contain positive ints, got {k!r}")
        if k > train_features.shape[0]:
            raise ValueError(
                f"k={k} in ks is larger than the bank train_features "
                f"({train_features.shape[0]} samples)"
            )
    _, indices = nearest_neighbors(
        train_features, test_features, max(ks), metric="cosine", backend=backend,
        chunk_size=chunk_size,
    )
    match = train_labels.to(indices.device)[indices] == test_labels.to(indices.device)[:, None]
    return {f"recall@{k}": float(match[:, :k].any(dim=1).double().mean()) for k in ks}
