r"""InfoNCE family: InfoNCE/MoCo, MoCo v3's loss, SimCLR's NT-Xent, DCL and DCLW, and SimCSE's
loss (InfoNCE on two dropout encodings of each sentence).

(The hard contrastive loss of Wang & Liu 2021, built from the same pieces, is
:mod:`contrastkit.losses.hard_contrastive`.)

All functions L2-normalise their embeddings along the last dimension, return the mean over
anchors as a scalar tensor and accept as ``temperature``:

* a float > 0;
* a temperature function (e.g. :class:`~contrastkit.losses.dystress.DySTreSSTemperature`)
  mapping a tensor of cosine similarities to temperatures of the same shape. It is evaluated
  on *detached* similarities and divides every logit element-wise, the positive's included
  (Manna et al. 2023, DySTreSS Alg. 3);
* a :class:`~contrastkit.losses.temperature.PairTemperature` with separate temperatures for
  positive and negative logits.

Notation: :math:`q_i, k_i` normalised query and key of anchor i, :math:`n_j` normalised
negatives (a memory queue), :math:`\tau_{ij} = \tau(s_{ij})` the temperature of a pair.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from contrastkit.checks import (
    check_batch_has_negatives,
    check_embedding_layout,
    check_positive_float,
    check_same_dim,
    check_same_dtype,
    check_same_shape,
)
from contrastkit.losses._logsumexp import Candidates, negative_lse
from contrastkit.losses._normalize import normalize_checked, rowdot
from contrastkit.losses._pairs import positive_logits, prepare_pairs
from contrastkit.losses.temperature import Temperature, check_temperature, split_temperature
from contrastkit.precision import at_least_float32

__all__ = [
    "DCLLoss",
    "DCLWLoss",
    "InfoNCELoss",
    "MoCoV3Loss",
    "NTXentLoss",
    "dcl",
    "dclw",
    "info_nce",
    "moco_v3",
    "nt_xent",
    "simcse",
]


def info_nce(
    query: Tensor, key: Tensor, negatives: Tensor | None = None, *, temperature: Temperature = 0.1
) -> Tensor:
    r"""InfoNCE loss (Denize et al. 2023, eq. 3); with a queue, the MoCo loss (He et al. 2020).

    In-batch (``negatives`` None), the candidates of anchor i are all N keys:

    .. math::
        L = -\frac1N \sum_i \log
            \frac{\exp(q_i \cdot k_i / \tau_{ii})}{\sum_{j=1}^N \exp(q_i \cdot k_j / \tau_{ij})}

    With ``negatives`` (K, D), the candidates are :math:`k_i` followed by the K negatives:
    the denominator is :math:`\exp(q_i \cdot k_i/\tau) + \sum_{j=1}^K \exp(q_i \cdot n_j/\tau)`.

    Args:
        query: (N, D) online embeddings.
        key: (N, D) embeddings of the positives, row by row.
        negatives: optional (K, D) extra negatives (memory queue).
        temperature: float > 0, temperature function, or ``PairTemperature``.

    Returns:
        Scalar tensor, the mean over the N anchors. The key receives gradient.

    Raises:
        ValueError: bad shapes/dtypes, NaN/Inf, a batch of one without ``negatives``, or a bad
            temperature.
    """
    check_temperature("temperature", temperature)
    pairs = prepare_pairs(query, key, negatives)
    pos_t, neg_t = split_temperature(temperature)
    pos = positive_logits(pairs.query, pairs.key, pos_t)  # (N,) q_i.k_i / tau
    lse, _ = negative_lse(pairs.query, pairs.negatives, neg_t, diagonals=pairs.diagonals)  # (N,)
    # -log(e^pos / (e^pos + sum_j e^{l_ij})) = log(e^pos + e^lse) - pos, lse = log sum_j e^{l_ij}
    return (torch.logaddexp(pos, lse) - pos).mean()


def moco_v3(
    query: Tensor, key: Tensor, *, temperature: float | Tensor = 1.0, key_offset: int = 0
) -> Tensor:
    r"""MoCo v3's contrastive loss (Chen, Xie & He 2021, *An Empirical Study of Training
    Self-Supervised Vision Transformers*, Sec. 2), one direction, with the official code's
    factor :math:`2\tau` (facebookresearch/moco-v3 ``moco/builder.py``,
    ``MoCo.contrastive_loss``).

    In-batch InfoNCE without a queue: the candidates of query i are all M keys of the batch
    (the momentum encoder's, gathered from every process), its positive being key
    :math:`k_{o+i}` (``o`` = ``key_offset``, the first row of this process's keys):

    .. math::
        L = 2\tau \cdot \Bigl( -\frac1N \sum_{i=1}^N \log
            \frac{\exp(q_i \cdot k_{o+i} / \tau)}{\sum_{j=1}^M \exp(q_i \cdot k_j / \tau)} \Bigr)

    With ``key_offset`` 0 and M = N it is :math:`2\tau` times :func:`info_nce` in-batch. The
    :math:`2\tau` factor is the official code's (the paper writes the InfoNCE alone; the
    factor is discussed in facebookresearch/moco-v3 issue 31); the method
    (:class:`contrastkit.methods.MoCoV3`) sums the two directions ``ctr(q1, k2) + ctr(q2, k1)``
    as that code does.

    Args:
        query: (N, D) online predictions.
        key: (M, D) keys, M >= N: the momentum encoder's projections of the other view, of
            this process's batch (M = N) or gathered from every process in rank order.
        temperature: :math:`\tau`, a float > 0 (or a 0-d tensor: a schedule's value); MoCo v3's
            default is 1.0.
        key_offset: row of ``key`` holding the positive of ``query[0]`` (under DDP: rank times
            the per-process batch, the official code's label offset).

    Returns:
        Scalar tensor, the mean over the N queries times :math:`2\tau`. The key receives
        gradient if it has one (the method's keys have none).

    Raises:
        ValueError: bad shapes/dtypes, NaN/Inf, fewer than 2 keys, a ``key_offset`` that puts
            a positive outside ``key``, or a bad temperature.
    """
    check_temperature("temperature", temperature, per_pair=False)
    check_embedding_layout("query", query)
    check_embedding_layout("key", key)
    check_same_dim("query", query, "key", key)
    check_same_dtype("query", query, "key", key)
    check_batch_has_negatives("key", key)
    n, m = query.shape[0], key.shape[0]
    if isinstance(key_offset, bool) or not isinstance(key_offset, int) or not (
            0 <= key_offset <= m - n):
        raise ValueError(f"key_offset must be an int in [0, {m - n}] (key has {m} rows, query "
                         f"{n}), got {key_offset!r}")
    query, key = at_least_float32(query), at_least_float32(key)
    query_hat, _ = normalize_checked("query", query)
    key_hat, key_norms = normalize_checked("key", key)
    pos = positive_logits(query_hat, key_hat[key_offset : key_offset + n], temperature)
    # every key but the positive is a negative: the diagonal at offset o is the positives'
    lse, _ = negative_lse(query_hat, Candidates(key, key_norms), temperature,
                          diagonals=(key_offset,))
    return 2 * temperature * (torch.logaddexp(pos, lse) - pos).mean()


def _view_logits(z1: Tensor, z2: Tensor, temperature: Temperature) -> tuple[Tensor, Tensor]:
    """Positive logits and log-sum-exp over the 2N - 2 negatives of each of the 2N views."""
    check_temperature("temperature", temperature)
    check_embedding_layout("z1", z1)
    check_embedding_layout("z2", z2)
    check_same_shape("z1", z1, "z2", z2)
    check_same_dtype("z1", z1, "z2", z2)
    check_batch_has_negatives("z1", z1)
    z1, z2 = at_least_float32(z1), at_least_float32(z2)
    (z1_hat, norms1), (z2_hat, norms2) = normalize_checked("z1", z1), normalize_checked("z2", z2)
    pos_t, neg_t = split_temperature(temperature)
    n = z1.shape[0]
    pos = positive_logits(z1_hat, z2_hat, pos_t).repeat(2)
    views = Candidates(torch.cat([z1, z2]), torch.cat([norms1, norms2]))
    lse, _ = negative_lse(torch.cat([z1_hat, z2_hat]), views, neg_t, diagonals=(0, n, -n))
    return pos, lse


def nt_xent(z1: Tensor, z2: Tensor, *, temperature: Temperature = 0.5) -> Tensor:
    r"""NT-Xent loss of SimCLR (Chen et al. 2020), which DySTreSS builds on (Manna et al. 2023,
    Alg. 3).

    The 2N views :math:`z = [z^1; z^2]` are all anchors; the positive of view a is its other
    view :math:`a^+`, the other 2N - 2 views are negatives:

    .. math::
        L = -\frac1{2N} \sum_{a=1}^{2N} \log
            \frac{\exp(s_{aa^+}/\tau_{aa^+})}{\sum_{b \ne a} \exp(s_{ab}/\tau_{ab})}

    Args:
        z1: (N, D) first views.
        z2: (N, D) second views.
        temperature: float > 0, temperature function, or ``PairTemperature``.

    Returns:
        Scalar tensor, the mean over the 2N anchors.

    Raises:
        ValueError: bad shapes, NaN/Inf, N < 2, or a bad temperature.
    """
    pos, lse = _view_logits(z1, z2, temperature)  # (2N,) each; lse over the 2N - 2 negatives
    return (torch.logaddexp(pos, lse) - pos).mean()  # -log(e^pos / (e^pos + e^lse))


def dcl(z1: Tensor, z2: Tensor, *, temperature: Temperature = 0.1) -> Tensor:
    r"""Decoupled contrastive loss (Yeh et al. 2022, DCL; a baseline of Manna et al. 2023).

    NT-Xent with the positive removed from the denominator:

    .. math::
        L = \frac1{2N} \sum_{a=1}^{2N} \Bigl[ -s_{aa^+}/\tau_{aa^+}
            + \log \sum_{b \ne a, a^+} \exp(s_{ab}/\tau_{ab}) \Bigr]

    Args:
        z1: (N, D) first views.
        z2: (N, D) second views.
        temperature: float > 0, temperature function, or ``PairTemperature``.

    Returns:
        Scalar tensor, the mean over the 2N anchors (may be negative).

    Raises:
        ValueError: bad shapes, NaN/Inf, N < 2, or a bad temperature.
    """
    pos, lse = _view_logits(z1, z2, temperature)  # (2N,) each; lse over b != a, a+
    return (lse - pos).mean()


def dclw(
    z1: Tensor, z2: Tensor, *, temperature: Temperature = 0.1, sigma: float = 0.5
) -> Tensor:
    r"""Weighted decoupled contrastive loss (Yeh et al. 2022, DCLW; a baseline of Manna et al.
    2023, Tables 2 and 13).

    :func:`dcl` with the positive term of each anchor scaled by the negative von Mises-Fisher
    weight of its pair:

    .. math::
        L = \frac1{2N} \sum_{a=1}^{2N} \Bigl[ -w_{i(a)} \, s_{aa^+}/\tau_{aa^+}
            + \log \sum_{b \ne a, a^+} \exp(s_{ab}/\tau_{ab}) \Bigr], \qquad
        w_i = 2 - \frac{\exp(s_i/\sigma)}{\frac1N \sum_{j=1}^N \exp(s_j/\sigma)}
            = 2 - N \, \mathrm{softmax}_i(s/\sigma)

    with :math:`s_i = \cos(z^1_i, z^2_i)` the similarity of pair i (both views of a pair share
    its weight; the weights average to 1). The weights are computed on *detached*
    similarities, as lightly's ``DCLWLoss`` (``negative_mises_fisher_weights``) does: they are
    constants for the gradient. Over the batch given: under DDP the method passes the
    gathered batch, so the softmax runs over the global batch (lightly's loss with
    ``gather_distributed`` normalises each process's weights over its own batch).

    Args:
        z1: (N, D) first views.
        z2: (N, D) second views.
        temperature: float > 0, temperature function, or ``PairTemperature`` (lightly's
            default 0.1).
        sigma: :math:`\sigma` > 0 of the weight (lightly's default 0.5).

    Returns:
        Scalar tensor, the mean over the 2N anchors (may be negative).

    Raises:
        ValueError: bad shapes, NaN/Inf, N < 2, a bad temperature or sigma.
    """
    check_positive_float("sigma", sigma)
    pos, lse = _view_logits(z1, z2, temperature)  # (2N,) each, checked
    with torch.no_grad():
        z1_hat, _ = normalize_checked("z1", at_least_float32(z1.detach()))
        z2_hat, _ = normalize_checked("z2", at_least_float32(z2.detach()))
        sim = rowdot(z1_hat, z2_hat)
        weight = 2.0 - sim.shape[0] * torch.softmax(sim / sigma, dim=0)
    return (lse - weight.repeat(2) * pos).mean()


class InfoNCELoss(nn.Module):
    """Module form of :func:`info_nce`; arguments are validated at construction."""

    def __init__(self, *, temperature: Temperature = 0.1) -> None:
        super().__init__()
        check_temperature("temperature", temperature)
        self.temperature = temperature

    def forward(self, query: Tensor, key: Tensor, negatives: Tensor | None = None) -> Tensor:
        return info_nce(query, key, negatives, temperature=self.temperature)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature!r}"


class NTXentLoss(nn.Module):
    """Module form of :func:`nt_xent`; arguments are validated at construction."""

    def __init__(self, *, temperature: Temperature = 0.5) -> None:
        super().__init__()
        check_temperature("temperature", temperature)
        self.temperature = temperature

    def forward(self, z1: Tensor, z2: Tensor) -> Tensor:
        return nt_xent(z1, z2, temperature=self.temperature)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature!r}"


class DCLLoss(nn.Module):
    """Module form of :func:`dcl`; arguments are validated at construction."""

    def __init__(self, *, temperature: Temperature = 0.1) -> None:
        super().__init__()
        check_temperature("temperature", temperature)
        self.temperature = temperature

    def forward(self, z1: Tensor, z2: Tensor) -> Tensor:
        return dcl(z1, z2, temperature=self.temperature)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature!r}"


class DCLWLoss(nn.Module):
    """Module form of :func:`dclw`; arguments are validated at construction."""

    def __init__(self, *, temperature: Temperature = 0.1, sigma: float = 0.5) -> None:
        super().__init__()
        check_temperature("temperature", temperature)
        check_positive_float("sigma", sigma)
        self.temperature, self.sigma = temperature, sigma

    def forward(self, z1: Tensor, z2: Tensor) -> Tensor:
        return dclw(z1, z2, temperature=self.temperature, sigma=self.sigma)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature!r}, sigma={self.sigma!r}"


class MoCoV3Loss(nn.Module):
    """Module form of :func:`moco_v3` (one direction); arguments are validated at
    construction."""

    def __init__(self, *, temperature: float = 1.0) -> None:
        super().__init__()
        check_temperature("temperature", temperature, per_pair=False)
        self.temperature = temperature

    def forward(self, query: Tensor, key: Tensor, key_offset: int = 0) -> Tensor:
        return moco_v3(query, key, temperature=self.temperature, key_offset=key_offset)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature!r}"


def simcse(h: Tensor, h_positive: Tensor, *, temperature: Temperature = 0.05) -> Tensor:
    r"""Unsupervised SimCSE loss (Gao et al. 2021, "SimCSE: Simple Contrastive Learning of
    Sentence Embeddings", EMNLP 2021: the contrastive objective of its eq. 1 with, as section 3
    states, the two dropout encodings of a sentence as the positive pair).

    Each sentence :math:`x_i` of a batch of N is encoded twice with independent dropout masks,
    giving :math:`h_i` and :math:`h_i^+`; the other sentences' second encodings are the
    negatives:

    .. math::
        \ell_i = -\log \frac{e^{\mathrm{sim}(h_i, h_i^+)/\tau}}
                            {\sum_{j=1}^N e^{\mathrm{sim}(h_i, h_j^+)/\tau}}

    with :math:`\mathrm{sim}` the cosine similarity, averaged over the N anchors. It is
    :func:`info_nce` with query :math:`h` and key :math:`h^+`, one direction only (the anchors
    are the first encodings, as in SimCSE's code and equation). Any contrastkit temperature
    applies: with a per-pair temperature (DySTreSS, Manna et al. 2023, Alg. 1/2) the logit of
    each pair is divided by :math:`\tau(\mathrm{sim}(h_i, h_j^+))`, evaluated on the detached
    similarity. SimCSE's default temperature is 0.05.

    Args:
        h: (N, D) first encodings (dropout mask 1) of the N sentences.
        h_positive: (N, D) second encodings (dropout mask 2), row i the positive of ``h[i]``.
        temperature: float > 0, per-pair temperature function or ``PairTemperature``.

    Returns:
        Scalar tensor, the mean of the per-sentence losses over the N sentences.

    Raises:
        ValueError: bad shapes, NaN/Inf, N < 2, or a bad temperature.
    """
    return info_nce(h, h_positive, temperature=temperature)
