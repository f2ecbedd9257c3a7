r"""ReSSL and SCE losses of Denize et al. 2023, *Similarity Contrastive Estimation*.

Notation: :math:`q_i` normalised query (online branch), :math:`k_i` normalised key (target
branch), both L2-normalised. The negatives of anchor i are either the other keys
:math:`k_j, j \ne i` (in-batch, ``negatives`` None, as eqs. 4-6 are written) or the K rows
:math:`n_j` of a memory queue (the paper's implementation). :math:`c_j` denotes a negative.
The target distributions are computed without gradient.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastkit.checks import check_unit_interval
from contrastkit.losses._logsumexp import negative_lse, target_distribution
from contrastkit.losses._pairs import positive_logits, prepare_pairs
from contrastkit.losses.temperature import check_temperature

__all__ = ["POSITIVE_TARGETS", "RESSLLoss", "SCELoss", "ressl", "sce", "sce_reference",
           "sce_terms"]

#: How the key's target distribution treats the positive: ``masked`` (eq. 5's
#: :math:`1_{i \ne k}`: weight exactly 0) or ``zero_logit`` (the authors' eztorch code with
#: ``use_keys: False``, its default: the positive's key-key logit is a constant 0 beside the
#: negatives' ``k_i . c_j / tau_m``, so it keeps a weight ``1 / (1 + sum_j exp(k_i . c_j /
#: tau_m))`` in the target).
POSITIVE_TARGETS = ("masked", "zero_logit")


def _check_positive_target(positive_target: str) -> None:
    if positive_target not in POSITIVE_TARGETS:
        raise ValueError(f"positive_target must be one of {', '.join(POSITIVE_TARGETS)}, got "
                         f"{positive_target!r}")


def _sce_parts(
    query: Tensor,
    key: Tensor,
    negatives: Tensor | None,
    temperature: float,
    target_temperature: float,
    *,
    with_target: bool = True,
    positive_target: str = "masked",
) -> tuple[Tensor, Tensor, Tensor]:
    """Per anchor: positive logit, log-sum-exp over negatives, and the target's weighted
    logits: ``sum_j s2_ij * logit_ij`` (``masked``), or ``a_i * logit_i+ + (1 - a_i) *
    sum_j s2_ij * logit_ij`` with ``a_i`` the positive's weight given a zero target logit
    (``zero_logit``; the negatives' weights of that softmax are ``(1 - a_i) s2_ij``)."""
    check_temperature("temperature", temperature, per_pair=False)
    check_temperature("target_temperature", target_temperature, per_pair=False)
    _check_positive_target(positive_target)
    pairs = prepare_pairs(query, key, negatives)
    target = a = None
    if with_target:
        target, a = target_distribution(
            pairs.key, pairs.negatives, target_temperature, pairs.diagonals,
            zero_logit=positive_target == "zero_logit",
        )
    lse, wdot = negative_lse(
        pairs.query, pairs.negatives, temperature, diagonals=pairs.diagonals, target=target
    )
    pos = positive_logits(pairs.query, pairs.key, temperature)
    if a is not None:  # the zero-logit positive's weight a_i, the negatives' (1 - a_i) s2_ij
        wdot = torch.lerp(wdot, pos, a)  # a_i * pos_i + (1 - a_i) * wdot_i
    return pos, lse, wdot


def ressl(
    query: Tensor,
    key: Tensor,
    negatives: Tensor | None = None,
    *,
    temperature: float = 0.1,
    target_temperature: float = 0.04,
) -> Tensor:
    r"""ReSSL loss (Zheng et al. 2021) as written by Denize et al. 2023, eqs. 4-6.

    .. math::
        s^1_{ik} = \frac{\exp(q_i \cdot c_k / \tau)}{\sum_j \exp(q_i \cdot c_j / \tau)},\quad
        s^2_{ik} = \frac{\exp(k_i \cdot c_k / \tau_m)}{\sum_j \exp(k_i \cdot c_j / \tau_m)},\quad
        L = -\frac1N \sum_i \sum_k s^2_{ik} \log s^1_{ik}

    with sums over the negatives of anchor i only (in-batch the ``1_{i != k}`` of eqs. 4-5).
    :math:`s^2` (target, sharpened by ``target_temperature`` :math:`\tau_m`) has no gradient.
    In-batch, the key still gets gradient as a candidate of the online distribution; with a
    queue it gets none.

    Args:
        query: (N, D) online embeddings.
        key: (N, D) target embeddings.
        negatives: optional (K, D) queue.
        temperature: online temperature :math:`\tau` > 0.
        target_temperature: target temperature :math:`\tau_m` > 0.

    Returns:
        Scalar tensor, the mean over anchors.

    Raises:
        ValueError: bad shapes/dtypes, NaN/Inf, a batch of one without ``negatives``, or a
            temperature that is not a finite float > 0.
    """
    _, lse, wdot = _sce_parts(query, key, negatives, temperature, target_temperature)
    # Eq. 6 with log s1_ik = l_ik - lse_i(neg) (eq. 4) and sum_k s2_ik = 1 (eq. 5):
    #   -sum_k s2_ik log s1_ik = lse_i(neg) - sum_k s2_ik l_ik
    return (lse - wdot).mean()


def sce_terms(
    query: Tensor,
    key: Tensor,
    negatives: Tensor | None = None,
    *,
    temperature: float = 0.1,
    target_temperature: float = 0.07,
) -> dict[str, Tensor]:
    r"""The three terms of SCE Proposition 1 (Denize et al. 2023, eq. 11).

    The proof is in appendix B of the supplement of the conference version (Denize et al. 2023,
    WACV).

    .. math::
        L_{SCE} = \lambda L_{InfoNCE} + (1 - \lambda)(L_{ReSSL} + L_{Ceil})

    * ``'info_nce'``: :math:`L_{InfoNCE}` of eq. (3) (:func:`~contrastkit.losses.infonce.info_nce`);
    * ``'ressl'``: :math:`L_{ReSSL}` of eq. (6) (:func:`ressl` at these temperatures);
    * ``'ceil'``:

      .. math::
          L_{Ceil} = -\frac1N \sum_i \sum_k s^2_{ik}
            \log \frac{\sum_{j \ne i} \exp(q_i \cdot c_j/\tau)}
                      {\exp(q_i \cdot k_i/\tau) + \sum_{j \ne i} \exp(q_i \cdot c_j/\tau)}
            = \frac1N \sum_i \bigl[\mathrm{lse}_i(\text{pos} + \text{neg})
                                   - \mathrm{lse}_i(\text{neg})\bigr]

      the log-ratio of the online denominators without/with the positive. In the proof it is
      weighted by :math:`\sum_k s^2_{ik} = 1`, hence the weight drops out. It is >= 0.

    The identity ``sce(coeff=c) == c * info_nce + (1 - c) * (ressl + ceil)`` holds for every
    ``c`` (to float rounding), which allows free coefficients (SCE Table 3).

    Args:
        query, key, negatives, temperature, target_temperature: as in :func:`sce`.

    Returns:
        Dict of three scalar tensors: ``'info_nce'``, ``'ressl'``, ``'ceil'``.
    """
    pos, lse_neg, wdot = _sce_parts(query, key, negatives, temperature, target_temperature)
    lse_all = torch.logaddexp(pos, lse_neg)
    return {
        "info_nce": (lse_all - pos).mean(),
        "ressl": (lse_neg - wdot).mean(),
        "ceil": (lse_all - lse_neg).mean(),
    }


def sce(
    query: Tensor,
    key: Tensor,
    negatives: Tensor | None = None,
    *,
    temperature: float = 0.1,
    target_temperature: float = 0.07,
    coeff: float = 0.5,
    positive_target: str = "masked",
) -> Tensor:
    r"""SCE loss (Denize et al. 2023, eqs. 8-10).

    .. math::
        w^2_{ik} = \lambda \, 1_{k = i^+} + (1 - \lambda) \, s^2_{ik},\qquad
        p^1_{ik} = \frac{\exp(q_i \cdot c_k / \tau)}{\sum_{j} \exp(q_i \cdot c_j / \tau)},\qquad
        L = -\frac1N \sum_i \sum_k w^2_{ik} \log p^1_{ik}

    :math:`s^2` is eq. (5), the key's softmax at ``target_temperature`` over the negatives
    only: the positive is *masked* out (weight exactly 0), as eq. (5) writes with
    :math:`1_{i \ne k}`, not given a zero logit as in the pseudo-code (``positive_target=
    "zero_logit"`` takes the pseudo-code's and the authors' code's form, see
    :data:`POSITIVE_TARGETS`). :math:`p^1` is the
    query's softmax over the positive :math:`k_i` and the negatives. :math:`\lambda` =
    ``coeff``. The target :math:`w^2` has no gradient; the key gets gradient through the
    positive logit (and, in-batch, as a candidate).

    Args:
        query: (N, D) online embeddings.
        key: (N, D) target embeddings, positives row by row.
        negatives: optional (K, D) queue; in-batch the negatives of i are keys j != i.
        temperature: online temperature :math:`\tau` > 0.
        target_temperature: target temperature :math:`\tau_m` > 0.
        coeff: :math:`\lambda` in [0, 1]; 1 gives InfoNCE, 0 gives ReSSL + Ceil.
        positive_target: ``masked`` (eq. 5) or ``zero_logit`` (the authors' code), see
            :data:`POSITIVE_TARGETS`.

    Returns:
        Scalar tensor, the mean over anchors.

    Raises:
        ValueError: as :func:`ressl`, ``coeff`` outside [0, 1], or an unknown
            ``positive_target``.
    """
    check_unit_interval("coeff", coeff)
    # pos: (N,) l_i+ = q_i.k_i / tau; lse_neg: (N,) log sum_j exp(l_ij) over the negatives;
    # wdot: (N,) sum_j s2_ij l_ij (eq. 5 target, no gradient). No (N, 1 + K) matrix is built.
    pos, lse_neg, wdot = _sce_parts(
        query, key, negatives, temperature, target_temperature, with_target=coeff < 1.0,
        positive_target=positive_target,
    )
    # Eq. 10 with log p1_ik = l_ik - lse_i(pos, neg) (eq. 9) and sum_k w2_ik = 1 (eq. 8):
    #   -sum_k w2_ik log p1_ik = lse_i(pos, neg) - lambda l_i+ - (1 - lambda) sum_j s2_ij l_ij
    # (:func:`sce_reference` is eqs. 8-10 as written; the tests hold the two equal).
    return (torch.logaddexp(pos, lse_neg) - coeff * pos - (1.0 - coeff) * wdot).mean()


def sce_reference(
    query: Tensor,
    key: Tensor,
    negatives: Tensor | None = None,
    *,
    temperature: float = 0.1,
    target_temperature: float = 0.07,
    coeff: float = 0.5,
    positive_target: str = "masked",
) -> Tensor:
    r"""SCE eqs. 8-10 written as the paper writes them, one equation per line.

    The readable twin of :func:`sce` (same arguments and value, to float rounding): it builds
    the (N, 1 + K) matrices of the pseudo-code of SCE appendix A (positive in column 0, the
    negatives :math:`c_j` after it) and takes the cross-entropy of eq. 10. :func:`sce` computes
    the same number without those matrices; the algebra step is written above its last line.
    No argument checks: use :func:`sce` for training.

    Args:
        query, key, negatives, temperature, target_temperature, coeff, positive_target: as
            in :func:`sce` (``zero_logit``: eq. 5's softmax taken over a zero logit in column 0
            and the negatives, as the pseudo-code writes it).

    Returns:
        Scalar tensor, the mean over anchors.
    """
    z1, z2 = F.normalize(query, dim=1), F.normalize(key, dim=1)  # (N, D) each
    if negatives is None:  # in-batch: the negatives of i are the keys j != i, (N, N - 1)
        off_diagonal = ~torch.eye(len(z2), dtype=torch.bool, device=z2.device)
        sim1_neg = (z1 @ z2.T)[off_diagonal].view(len(z1), -1)
        sim2_neg = (z2 @ z2.T)[off_diagonal].view(len(z2), -1)
    else:  # queue: the same K negatives for every anchor, (N, K)
        c = F.normalize(negatives, dim=1)
        sim1_neg, sim2_neg = z1 @ c.T, z2 @ c.T
    one_hot = F.pad(torch.ones_like(sim2_neg[:, :1]), (0, sim2_neg.shape[1]))  # 1_{k=i+}
    if positive_target == "zero_logit":  # the pseudo-code: logit 0 in column 0, (N, 1 + K)
        s2 = torch.softmax(F.pad(sim2_neg.detach() / target_temperature, (1, 0)), dim=1)
    else:  # eq. 5, (N, K) over the negatives only, then weight 0 for the positive
        s2 = F.pad(torch.softmax(sim2_neg.detach() / target_temperature, dim=1), (1, 0))
    w2 = coeff * one_hot + (1 - coeff) * s2  # eq. 8, (N, 1 + K), column 0: i+
    sim1 = torch.cat([(z1 * z2).sum(1, keepdim=True), sim1_neg], dim=1)  # (N, 1 + K)
    log_p1 = torch.log_softmax(sim1 / temperature, dim=1)  # eq. 9, (N, 1 + K)
    return -(w2 * log_p1).sum(dim=1).mean()  # eq. 10


class RESSLLoss(nn.Module):
    """Module form of :func:`ressl`; arguments are validated at construction."""

    def __init__(self, *, temperature: float = 0.1, target_temperature: float = 0.04) -> None:
        super().__init__()
        check_temperature("temperature", temperature, per_pair=False)
        check_temperature("target_temperature", target_temperature, per_pair=False)
        self.temperature, self.target_temperature = temperature, target_temperature

    def forward(self, query: Tensor, key: Tensor, negatives: Tensor | None = None) -> Tensor:
        return ressl(
            query,
            key,
            negatives,
            temperature=self.temperature,
            target_temperature=self.target_temperature,
        )

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, target_temperature={self.target_temperature}"


class SCELoss(nn.Module):
    """Module form of :func:`sce`; arguments are validated at construction."""

    def __init__(
        self, *, temperature: float = 0.1, target_temperature: float = 0.07, coeff: float = 0.5,
        positive_target: str = "masked",
    ) -> None:
        super().__init__()
        check_temperature("temperature", temperature, per_pair=False)
        check_temperature("target_temperature", target_temperature, per_pair=False)
        check_unit_interval("coeff", coeff)
        _check_positive_target(positive_target)
        self.temperature, self.target_temperature, self.coeff = (
            temperature,
            target_temperature,
            coeff,
        )
        self.positive_target = positive_target

    def forward(self, query: Tensor, key: Tensor, negatives: Tensor | None = None) -> Tensor:
        return sce(
            query,
            key,
            negatives,
            temperature=self.temperature,
            target_temperature=self.target_temperature,
            coeff=self.coeff,
            positive_target=self.positive_target,
        )

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, target_temperature={self.target_temperature}, "
            f"coeff={self.coeff}, positive_target={self.positive_target}"
        )
