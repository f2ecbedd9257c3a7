"""Weighted k-nearest-neighbour classification of feature tensors: neighbour search and vote.

Shared by the pretraining engine's kNN monitor (:mod:`contrastkit.train.module`) and
``contrastkit eval knn`` (:mod:`contrastkit.eval.knn`, which adds the accuracies), so that
both report the same accuracy on the same bank.

The classifier of Wu et al. 2018, "Unsupervised Feature Learning via Non-Parametric Instance
Discrimination" (eq. 8), used by DySTreSS (Manna et al. 2023, appendix: k = 200, cosine weights
on balanced CIFAR; k = 1 and 10 with L2 distance on long-tailed CIFAR) and SINCERE (Feeney &
Hughes 2023, App. M: 1-NN and 5-NN, cosine similarity to choose neighbours and weight votes).

Both backends (faiss when installed, torch otherwise) only search neighbours; the vote is the
same torch code, so they agree on predictions whenever the neighbour sets agree. The search is
chunked over the queries: one chunk holds a ``chunk_size x N_bank`` similarity block, never the
full ``N_test x N_bank`` matrix.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from contrastkit.checks import (
    check_features,
    check_labels,
    check_positive_float,
    check_same_dim,
    resolve_num_classes,
)

Metric = Literal["cosine", "l2"]
Backend = Literal["auto", "faiss", "torch"]
Weighting = Literal["exp", "uniform"]

# Bytes of one chunk's similarity block when ``chunk_size`` is not given (256 MiB of float32).
_CHUNK_BUDGET_BYTES = 256 * 2**20


def _check_k(k: int, bank_size: int, bank_name: str = "train_features") -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    if k > bank_size:
        raise ValueError(f"k={k} is larger than the bank {bank_name} ({bank_size} samples)")


def _faiss_available() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def _resolve_backend(backend: str, device: torch.device) -> str:
    if backend not in ("auto", "faiss", "torch"):
        raise ValueError(f"backend must be 'auto', 'faiss' or 'torch', got {backend!r}")
    if backend == "auto":
        return "faiss" if device.type == "cpu" and _faiss_available() else "torch"
    if backend == "faiss" and not _faiss_available():
        raise ImportError("backend='faiss' needs faiss: pip install 'contrastkit[faiss]'")
    return backend


def _default_chunk(bank_size: int) -> int:
    return max(1, min(4096, _CHUNK_BUDGET_BYTES // (4 * bank_size)))


def _prepare(x: Tensor, metric: str) -> Tensor:
    x = x.detach().to(torch.float32)
    if metric == "cosine":
        x = torch.nn.functional.normalize(x, dim=1)
    return x.contiguous()


def nearest_neighbors(
    bank: Tensor,
    queries: Tensor,
    k: int,
    *,
    metric: Metric = "cosine",
    backend: Backend = "auto",
    chunk_size: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Exact top-``k`` neighbours of each query in ``bank``, in float32, chunked over queries.

    For ``metric="cosine"`` both sets are L2-normalised and neighbours are the largest inner
    products; for ``metric="l2"`` the features are used as given and neighbours are the smallest
    Euclidean distances ``||q - b||_2`` (computed as ``sqrt(max(0, |q|^2 + |b|^2 - 2 q.b))``).

    Neighbour ties (exactly equal similarities) may be ordered differently by faiss and torch;
    on data without such ties both backends return the same neighbours in the same order.

    Args:
        bank: ``(N_bank, D)`` features searched.
        queries: ``(N_query, D)`` features.
        k: number of neighbours, ``1 <= k <= N_bank``.
        metric: ``"cosine"`` or ``"l2"``.
        backend: ``"faiss"``, ``"torch"`` or ``"auto"`` (faiss for CPU tensors when installed).
        chunk_size: queries per chunk; default keeps a chunk's ``chunk x N_bank`` block <= 256 MiB.

    Returns:
        ``(values, indices)``, both ``(N_query, k)`` on the bank's device: cosine similarities in
        decreasing order, or Euclidean distances in increasing order, and bank row indices.
    """
    check_features("bank", bank)
    check_features("queries", queries)
    check_same_dim("bank", bank, "queries", queries)
    _check_k(k, bank.shape[0], "bank")
    if metric not in ("cosine", "l2"):
        raise ValueError(f"metric must be 'cosine' or 'l2', got {metric!r}")
    if chunk_size is None:
        chunk_size = _default_chunk(bank.shape[0])
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    device = bank.device
    use = _resolve_backend(backend, device)
    bank32, queries32 = _prepare(bank, metric), _prepare(queries, metric).to(device)
    if use == "faiss":
        return _search_faiss(bank32, queries32, k, metric, chunk_size)
    return _search_torch(bank32, queries32, k, metric, chunk_size)


def _search_torch(
    bank: Tensor, queries: Tensor, k: int, metric: str, chunk_size: int
) -> tuple[Tensor, Tensor]:
    values, indices = [], []
    bank_sq = (bank * bank).sum(dim=1) if metric == "l2" else None
    for start in range(0, queries.shape[0], chunk_size):
        q = queries[start : start + chunk_size]
        sims = q @ bank.T
        if metric == "cosine":
            v, i = torch.topk(sims, k, dim=1, largest=True, sorted=True)
        else:
            sq = ((q * q).sum(dim=1, keepdim=True) + bank_sq - 2.0 * sims).clamp_min_(0.0)
            v, i = torch.topk(sq, k, dim=1, largest=False, sorted=True)
            v = v.sqrt()
        values.append(v)
        indices.append(i)
    return torch.cat(values), torch.cat(indices)


def _search_faiss(
    bank: Tensor, queries: Tensor, k: int, metric: str, chunk_size: int
) -> tuple[Tensor, Tensor]:
    import faiss

    dim = bank.shape[1]
    index = faiss.IndexFlatIP(dim) if metric == "cosine" else faiss.IndexFlatL2(dim)
    index.add(bank.cpu().numpy())
    q_np = queries.cpu().numpy()
    values, indices = [], []
    for start in range(0, q_np.shape[0], chunk_size):
        v, i = index.search(q_np[start : start + chunk_size], k)
        values.append(torch.from_numpy(v))
        indices.append(torch.from_numpy(i))
    v, i = torch.cat(values), torch.cat(indices).to(torch.long)
    if metric == "l2":
        v = v.clamp_min(0.0).sqrt()
    return v.to(bank.device), i.to(bank.device)


def knn_predict(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    *,
    k: int = 200,
    temperature: float = 0.1,
    metric: Metric = "cosine",
    weighting: Weighting | None = None,
    num_classes: int | None = None,
    backend: Backend = "auto",
    chunk_size: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Weighted k-NN vote (Wu et al. 2018, eq. 8; kNN protocols of Manna et al. 2023 and Feeney &
    Hughes 2023).

    For a test feature ``q`` with neighbours ``N_k(q)`` in the training bank, the score of class
    ``c`` is ``w_c(q) = sum_{i in N_k(q)} alpha_i * 1[y_i = c]`` and the prediction is
    ``argmax_c w_c(q)``. Vote weights ``alpha_i``:

    * ``metric="cosine"`` (features L2-normalised inside), ``weighting="exp"`` (default):
      ``alpha_i = exp(s_i / t)`` with ``s_i`` the cosine similarity (Wu et al. 2018).
    * ``metric="l2"`` (features used as given), ``weighting="uniform"`` (default): one vote per
      neighbour, the majority vote of scikit-learn's ``KNeighborsClassifier``. The DySTreSS
      long-tailed protocol only says "weights based on distance L2"; we choose the plain
      majority vote by default and offer ``weighting="exp"``: ``alpha_i = exp(-d_i / t)`` with
      ``d_i`` the Euclidean distance.

    Class-score ties go to the smallest class index (``torch.argmax`` returns the first maximum).

    Args:
        train_features: ``(N_train, D)`` bank features.
        train_labels: ``(N_train,)`` integer labels.
        test_features: ``(N_test, D)`` query features.
        k: number of neighbours (<= ``N_train``).
        temperature: ``t`` of the exponential weights.
        metric: ``"cosine"`` or ``"l2"``.
        weighting: ``"exp"`` or ``"uniform"``; None picks the default of ``metric`` above.
        num_classes: number of classes; default ``max(train_labels) + 1``. When given, every class
            must have a training sample.
        backend: ``"auto"``, ``"faiss"`` or ``"torch"`` neighbour search.
        chunk_size: queries per chunk (see :func:`nearest_neighbors`).

    Returns:
        ``(pred_labels, class_scores)``: ``(N_test,)`` long and ``(N_test, C)`` float32 scores.

    Raises:
        ValueError: on mismatched feature/label counts, ``k`` larger than the bank, an empty
            class, NaN features or bad options.
    """
    check_features("train_features", train_features)
    check_features("test_features", test_features)
    check_same_dim("train_features", train_features, "test_features", test_features)
    check_labels("train_labels", train_labels, train_features.shape[0], "train_features")
    _check_k(k, train_features.shape[0])
    check_positive_float("temperature", temperature)
    if weighting is None:
        weighting = "exp" if metric == "cosine" else "uniform"
    if weighting not in ("exp", "uniform"):
        raise ValueError(f"weighting must be 'exp' or 'uniform', got {weighting!r}")
    classes = resolve_num_classes(train_labels, num_classes, "train_labels")
    values, indices = nearest_neighbors(
        train_features, test_features, k, metric=metric, backend=backend, chunk_size=chunk_size
    )
    if weighting == "uniform":
        weights = torch.ones_like(values)
    elif metric == "cosine":
        weights = torch.exp(values / temperature)
    else:
        weights = torch.exp(-values / temperature)
    neighbour_labels = train_labels.to(indices.device)[indices]
    scores = torch.zeros(values.shape[0], classes, dtype=torch.float32, device=values.device)
    scores.scatter_add_(1, neighbour_labels, weights)
    return scores.argmax(dim=1), scores
