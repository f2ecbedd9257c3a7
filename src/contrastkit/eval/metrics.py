"""Geometry of learned embeddings: alignment, uniformity, tolerance, margins, hardness.

Sources:
* DySTreSS (Manna et al. 2023), appendix: uniformity (eq. 16), alignment (eq. 17), inter-class
  uniformity (eq. 18), relative penalty on negatives ``r(s_ij)`` (eq. 4).
* Wang & Liu 2021, "Understanding the Behaviour of Contrastive Loss" (CVPR): tolerance, hardness
  weights, local separation figures (supplement, figs. 1-7).
* SINCERE (Feeney & Hughes 2023): target-noise margin (Table 1, Fig. 2), information bound
  (Thm. 11).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from contrastkit.checks import (
    check_features,
    check_labels,
    check_positive_float,
    check_same_dim,
    check_same_shape,
    resolve_num_classes,
)

TemperatureLike = float | Callable[[Tensor], Tensor]

_ROW_BUDGET = 2**24  # entries of one chunk's pairwise block (64 MiB in float32)


def _rows_per_chunk(n_cols: int) -> int:
    return max(1, _ROW_BUDGET // max(1, n_cols))


def alignment(z1: Tensor, z2: Tensor, alpha: float = 2.0, *, normalize: bool = True) -> Tensor:
    """Alignment of positive pairs, Manna et al. 2023, eq. 17 (Wang & Isola 2020 with ``alpha``).

    ``A = (1 / N) sum_i ||z1_i - z2_i||_2^alpha``; ``alpha = 2`` is eq. 17. Lower is better
    aligned (zero also for a collapsed encoder).

    Args:
        z1: ``(N, D)`` embeddings of the first views.
        z2: ``(N, D)`` embeddings of the positives (row ``i`` pairs with row ``i`` of ``z1``).
        alpha: exponent of the distance, > 0.
        normalize: L2-normalise rows first (the metric is defined on the unit hypersphere).

    Returns:
        Scalar tensor.
    """
    check_features("z1", z1)
    check_features("z2", z2)
    check_same_shape("z1", z1, "z2", z2)
    check_positive_float("alpha", alpha)
    if normalize:
        z1, z2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    return (z1 - z2).norm(dim=1).pow(alpha).mean()


def _log_mean_exp_pairs(z: Tensor, t: float) -> Tensor:
    """``log( mean_{i<j} exp(-t ||z_i - z_j||^2) )`` over distinct unordered pairs, chunked."""
    n = z.shape[0]
    sq_norms = (z * z).sum(dim=1)
    parts = []
    rows = _rows_per_chunk(n)
    cols = torch.arange(n, device=z.device)
    for start in range(0, n, rows):
        block = z[start : start + rows]
        sq = (sq_norms[start : start + rows, None] + sq_norms[None, :] - 2.0 * block @ z.T)
        sq = sq.clamp_min(0.0)
        row_ids = torch.arange(start, start + block.shape[0], device=z.device)
        upper = cols[None, :] > row_ids[:, None]
        logits = (-t * sq).masked_select(upper)
        if logits.numel():
            parts.append(torch.logsumexp(logits, dim=0))
    num_pairs = n * (n - 1) / 2
    return torch.logsumexp(torch.stack(parts), dim=0) - math.log(num_pairs)


def uniformity(z: Tensor, t: float = 2.0, *, normalize: bool = True) -> Tensor:
    """Uniformity, Manna et al. 2023, eq. 16 (Wang & Isola 2020; Wang & Liu 2021).

    ``U = log( (2 / (N (N - 1))) sum_{i<j} exp(-t ||z_i - z_j||_2^2) )``: the expectation over
    ``p_pair`` is taken over the ``N (N - 1) / 2`` distinct unordered pairs (no ``i = j`` terms,
    which would add ``exp(0) = 1`` each). Computed with log-sum-exp, chunked over rows.
    Lower means more uniform. Two antipodal unit vectors give ``log exp(-2 * 4) = -8``.

    Args:
        z: ``(N, D)`` embeddings, ``N >= 2``.
        t: the scale (2 in eq. 16).
        normalize: L2-normalise rows first.

    Returns:
        Scalar tensor.
    """
    check_features("z", z)
    check_positive_float("t", t)
    if z.shape[0] < 2:
        raise ValueError(f"z needs at least 2 samples for pairs, got {z.shape[0]}")
    if normalize:
        z = F.normalize(z, dim=1)
    return _log_mean_exp_pairs(z, t)


def tolerance(z: Tensor, labels: Tensor) -> Tensor:
    """Tolerance (Wang & Liu 2021): mean cosine similarity of distinct same-class pairs.

    ``T = sum_c sum_{i != j, y_i = y_j = c} s_ij / sum_c n_c (n_c - 1)`` with ``s_ij`` the cosine
    similarity: the mean is pooled over all ordered pairs of *distinct* samples sharing a class
    (a sample is never paired with itself; larger classes hold more pairs). Classes with one
    sample contribute no pair. Computed per class as ``(||sum_i z_i||^2 - n_c) / (n_c (n_c - 1))``
    on normalised rows.

    Args:
        z: ``(N, D)`` embeddings (L2-normalised inside).
        labels: ``(N,)`` integer class labels.

    Returns:
        Scalar tensor in [-1, 1].

    Raises:
        ValueError: when no class has two samples.
    """
    check_features("z", z)
    check_labels("labels", labels, z.shape[0], "z")
    z = F.normalize(z, dim=1)
    labels = labels.to(z.device)
    classes = int(labels.max()) + 1
    sums = torch.zeros(classes, z.shape[1], dtype=z.dtype, device=z.device)
    sums.index_add_(0, labels, z)
    counts = torch.bincount(labels, minlength=classes).to(z.dtype)
    pairs = (counts * (counts - 1)).sum()
    if float(pairs) == 0:
        raise ValueError("labels has no class with 2 or more samples: tolerance needs pairs")
    return ((sums * sums).sum() - counts.sum()) / pairs


def mean_pairwise_similarity(z: Tensor) -> Tensor:
    """Mean cosine similarity of distinct pairs: Wang & Liu 2021's tolerance with every sample
    in one class, ``S = sum_{i != j} s_ij / (N (N - 1)) = (||sum_i z_i||^2 - N) / (N (N - 1))``
    on L2-normalised rows. Near 1 when every embedding is nearly the same vector (a collapsed
    representation, whose alignment, margins and separations are all near 0).

    Args:
        z: ``(N, D)`` embeddings, ``N >= 2`` (L2-normalised inside).

    Returns:
        Scalar tensor in [-1, 1].
    """
    check_features("z", z)
    if z.shape[0] < 2:
        raise ValueError(f"z needs at least 2 samples for pairs, got {z.shape[0]}")
    return tolerance(z, torch.zeros(z.shape[0], dtype=torch.long, device=z.device))


def class_centroids(z: Tensor, labels: Tensor, num_classes: int | None = None) -> Tensor:
    """Mean of the rows of each class, ``(C, D)``; rows are used as given (no normalisation).

    Raises:
        ValueError: when ``num_classes`` is given and a class has no sample.
    """
    check_features("z", z)
    check_labels("labels", labels, z.shape[0], "z")
    classes = resolve_num_classes(labels, num_classes, "labels")
    labels = labels.to(z.device)
    counts = torch.bincount(labels, minlength=classes)
    present = counts > 0
    sums = torch.zeros(classes, z.shape[1], dtype=z.dtype, device=z.device)
    sums.index_add_(0, labels, z)
    return sums[present] / counts[present, None].to(z.dtype)


def interclass_uniformity(
    z: Tensor, labels: Tensor, t: float = 2.0, *, num_classes: int | None = None
) -> Tensor:
    """Inter-class uniformity, Manna et al. 2023, eq. 18: uniformity of the class centroids.

    ``U_ic = log( mean_{a<b} exp(-t ||mu_a - mu_b||_2^2) )`` with ``mu_c`` the mean of the
    L2-normalised embeddings of class ``c``. The centroids are NOT re-normalised: the values the
    paper reports (-0.66 to -0.77 on ImageNet-100) are only reachable with centroids inside the
    ball (unit-norm centroids of well-separated classes would give about ``-2 t``). Classes
    absent from ``labels`` are skipped unless ``num_classes`` is given (then they raise).

    Args:
        z: ``(N, D)`` embeddings (L2-normalised inside).
        labels: ``(N,)`` integer labels with at least two distinct classes.
        t: the scale (2 in eq. 18).
        num_classes: optional number of classes, each must have a sample.

    Returns:
        Scalar tensor; lower means better separated class centroids.
    """
    check_features("z", z)
    check_positive_float("t", t)
    centroids = class_centroids(F.normalize(z, dim=1), labels, num_classes)
    if centroids.shape[0] < 2:
        raise ValueError("labels must contain at least 2 classes for inter-class uniformity")
    return _log_mean_exp_pairs(centroids, t)


def target_noise_margin(
    train_z: Tensor, train_labels: Tensor, test_z: Tensor, test_labels: Tensor
) -> tuple[float, Tensor, Tensor]:
    """Target-noise margin, Feeney & Hughes 2023, Table 1 and Fig. 2.

    For each test sample ``q`` (label ``y_q``): ``s_target(q) = max_{i: y_i = y_q} cos(q, x_i)``,
    the similarity to its nearest training sample of the same class, and
    ``s_noise(q) = max_{i: y_i != y_q} cos(q, x_i)``, to its nearest training sample of any other
    class. The margin is "the difference between each distribution's median cosine similarity"
    (Table 1): ``median(s_target) - median(s_noise)``; the median of an even count is the mean of
    the two middle values (``numpy.median``).

    Args:
        train_z: ``(N_train, D)`` training embeddings (L2-normalised inside).
        train_labels: ``(N_train,)`` labels.
        test_z: ``(N_test, D)`` test embeddings (L2-normalised inside).
        test_labels: ``(N_test,)`` labels; each must occur in ``train_labels``.

    Returns:
        ``(margin, target_sims, noise_sims)`` with ``(N_test,)`` similarity tensors.

    Raises:
        ValueError: when a test label has no training sample or the training set has one class.
    """
    check_features("train_z", train_z)
    check_features("test_z", test_z)
    check_same_dim("train_z", train_z, "test_z", test_z)
    check_labels("train_labels", train_labels, train_z.shape[0], "train_z")
    check_labels("test_labels", test_labels, test_z.shape[0], "test_z")
    train_labels = train_labels.to(train_z.device)
    test_labels = test_labels.to(train_z.device)
    if torch.unique(train_labels).numel() < 2:
        raise ValueError("train_labels has a single class: no noise (other class) neighbour")
    missing = set(torch.unique(test_labels).tolist()) - set(torch.unique(train_labels).tolist())
    if missing:
        raise ValueError(f"test_labels contains classes {sorted(missing)[:10]} absent from "
                         "train_labels: no target neighbour")
    bank = F.normalize(train_z, dim=1)
    queries = F.normalize(test_z, dim=1).to(bank.device)
    same, other = [], []
    rows = _rows_per_chunk(bank.shape[0])
    for start in range(0, queries.shape[0], rows):
        sims = queries[start : start + rows] @ bank.T
        y = test_labels[start : start + sims.shape[0]]
        is_target = y[:, None] == train_labels[None, :]
        same.append(sims.masked_fill(~is_target, -math.inf).amax(dim=1))
        other.append(sims.masked_fill(is_target, -math.inf).amax(dim=1))
    target_sims, noise_sims = torch.cat(same), torch.cat(other)
    margin = _median(target_sims) - _median(noise_sims)
    return margin, target_sims, noise_sims


def _median(x: Tensor) -> float:
    """Median of a 1-D tensor; for an even count, the mean of the two middle values."""
    s = x.sort().values
    n = s.shape[0]
    return float(s[n // 2]) if n % 2 else float((s[n // 2 - 1] + s[n // 2]) / 2)


def local_separation_gap(separation: dict[str, Tensor]) -> float:
    """Median similarity of an image's two views minus the median similarity to its nearest
    other image, from :func:`local_separation` (``median(positive) - median(negatives[:, 0])``,
    medians as in :func:`target_noise_margin`): positive when the views of an image are closer
    to each other than to any other image (Wang & Liu 2021, supplement, figs. 1-7, plot the two
    distributions).
    """
    return _median(separation["positive"].flatten()) - _median(separation["negatives"][:, 0])


def sincere_kl_bound(
    loss: float | Tensor, num_noise: int | Tensor, *, clamp: bool = False
) -> float | Tensor:
    """Lower bound on the symmetrised KL between target and noise, Feeney & Hughes 2023, Thm. 11.

    Theorem 11: ``L_SINCERE >= log|N| - (KL(p- || p+) + KL(p+ || p-))`` with ``|N|`` the number of
    noise examples in the selection task. Rearranged (the corollary after eq. 11):
    ``KL(p- || p+) + KL(p+ || p-) >= log|N| - L_SINCERE``. Loss in nats (natural log). The
    right-hand side may be negative; since a KL divergence is >= 0, ``clamp=True`` returns
    ``max(0, log|N| - L)``, the tighter bound.

    Args:
        loss: SINCERE loss value(s), in nats.
        num_noise: ``|N|``, number of noise (other-class) examples, >= 1.
        clamp: clamp the bound at 0.

    Returns:
        ``log(num_noise) - loss`` (float if both inputs are Python numbers, else a tensor).
    """
    if isinstance(num_noise, Tensor):
        if bool((num_noise < 1).any()):
            raise ValueError("num_noise must be >= 1 (the number of noise examples)")
        log_n = torch.log(num_noise.to(torch.float64))
    else:
        if isinstance(num_noise, bool) or not isinstance(num_noise, int) or num_noise < 1:
            raise ValueError(f"num_noise must be an int >= 1, got {num_noise!r}")
        log_n = math.log(num_noise)
    if isinstance(loss, Tensor):
        if not bool(torch.isfinite(loss).all()):
            raise ValueError("loss contains NaN or Inf values")
    elif not math.isfinite(float(loss)):
        raise ValueError(f"loss must be finite, got {loss}")
    bound = log_n - loss
    if clamp:
        bound = bound.clamp_min(0.0) if isinstance(bound, Tensor) else max(0.0, bound)
    return bound


def local_separation(
    z_anchor: Tensor,
    z_positive: Tensor,
    k: int = 10,
    *,
    negatives: str = "both",
) -> dict[str, Tensor]:
    """Similarity to the positive and to the ``k`` nearest negatives (Wang & Liu 2021, supp. figs.
    1-7).

    For anchor ``i`` the positive similarity is ``cos(a_i, p_i)``; the negatives are the views of
    the *other* samples of the batch: ``{a_j, p_j : j != i}`` for ``negatives="both"`` (the
    ``2N - 2`` negatives of SimCLR's loss), or only ``{p_j : j != i}`` for
    ``negatives="positives"`` (the ``N - 1`` negatives of a one-sided InfoNCE). The ``k`` largest
    negative similarities are returned in decreasing order (column 0 = nearest negative).

    Args:
        z_anchor: ``(N, D)`` anchor view embeddings (L2-normalised inside).
        z_positive: ``(N, D)`` positive view embeddings.
        k: number of nearest negatives, <= the number of negatives per anchor.
        negatives: ``"both"`` or ``"positives"``.

    Returns:
        ``{"positive": (N,), "negatives": (N, k)}`` cosine similarities.
    """
    check_features("z_anchor", z_anchor)
    check_features("z_positive", z_positive)
    check_same_shape("z_anchor", z_anchor, "z_positive", z_positive)
    if negatives not in ("both", "positives"):
        raise ValueError(f"negatives must be 'both' or 'positives', got {negatives!r}")
    n = z_anchor.shape[0]
    available = 2 * n - 2 if negatives == "both" else n - 1
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    if k > available:
        raise ValueError(f"k={k} is larger than the {available} negatives per anchor (N={n})")
    a = F.normalize(z_anchor, dim=1)
    p = F.normalize(z_positive, dim=1)
    bank = torch.cat([a, p]) if negatives == "both" else p
    rows = _rows_per_chunk(bank.shape[0])
    tops = []
    for start in range(0, n, rows):
        sims = a[start : start + rows] @ bank.T
        own = torch.arange(start, start + sims.shape[0], device=a.device)
        local = torch.arange(sims.shape[0], device=a.device)
        sims[local, own] = -math.inf
        if negatives == "both":
            sims[local, own + n] = -math.inf
        tops.append(torch.topk(sims, k, dim=1).values)
    return {"positive": (a * p).sum(dim=1), "negatives": torch.cat(tops)}


def hardness_weights(similarities: Tensor, temperature: TemperatureLike) -> Tensor:
    """Relative penalty on each negative, Manna et al. 2023, eq. 4 (Wang & Liu 2021, Sec. 3.2).

    ``r(s_ij) = exp(s_ij / t_ij) / sum_{k != i} exp(s_ik / t_ik)``: a softmax over the negatives
    of anchor ``i`` (last dimension), with ``t_ij = temperature`` for a float or
    ``t_ij = temperature(s_ij)`` for a callable mapping cosine similarities to temperatures
    element-wise (DySTreSS's dynamic temperature). For a constant temperature this is exactly
    ``|dL_i/ds_ij| / |dL_i/ds_ii+|``; for a similarity-dependent one it is the same expression
    with per-pair temperatures, ignoring the ``d t / d s`` term of the gradient.

    Args:
        similarities: ``(..., M)`` cosine similarities of each anchor to its ``M`` negatives.
        temperature: positive float or callable ``sims -> temperatures`` (same shape, > 0).

    Returns:
        ``(..., M)`` weights summing to 1 over the last dimension.
    """
    _check_similarities(similarities)
    if callable(temperature):
        temps = temperature(similarities)
        if not isinstance(temps, Tensor):
            temps = torch.as_tensor(temps, dtype=similarities.dtype, device=similarities.device)
        if temps.shape != similarities.shape and temps.numel() != 1:
            raise ValueError(
                f"temperature callable returned shape {tuple(temps.shape)}, expected "
                f"{tuple(similarities.shape)}"
            )
        if not bool(torch.isfinite(temps).all()) or bool((temps <= 0).any()):
            raise ValueError("temperature callable must return finite temperatures > 0")
    else:
        check_positive_float("temperature", temperature)
        temps = temperature
    return torch.softmax(similarities / temps, dim=-1)


def _check_similarities(similarities: Tensor) -> None:
    """Raise ``ValueError`` unless ``similarities`` is a finite floating tensor of rank >= 1."""
    if not isinstance(similarities, Tensor):
        raise ValueError(f"similarities must be a torch.Tensor, got {type(similarities).__name__}")
    if similarities.dim() < 1 or similarities.numel() == 0:
        raise ValueError(f"similarities must be non-empty with rank >= 1, got "
                         f"{tuple(similarities.shape)}")
    if not similarities.is_floating_point():
        raise ValueError(f"similarities must be floating point, got {similarities.dtype}")
    if not bool(torch.isfinite(similarities).all()):
        raise ValueError("similarities contains NaN or Inf values")
