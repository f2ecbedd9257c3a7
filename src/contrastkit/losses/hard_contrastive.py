r"""The hard contrastive loss of Wang & Liu 2021, *Understanding the Behaviour of Contrastive Loss*.

InfoNCE whose denominator keeps, per anchor, only the ``num_hard`` negatives most similar to it
(the main paper, section 5; its supplement reports the loss's temperature sweeps). The
selection of those negatives is :mod:`._hard_negatives`; the temperatures accepted are those of
:func:`~contrastkit.losses.info_nce`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from contrastkit.losses._logsumexp import negative_lse
from contrastkit.losses._pairs import positive_logits, prepare_pairs
from contrastkit.losses.temperature import Temperature, check_temperature, split_temperature

__all__ = ["HardContrastiveLoss", "hard_contrastive"]


def _check_num_hard(num_hard: object) -> None:
    if isinstance(num_hard, bool) or not isinstance(num_hard, int) or num_hard < 1:
        raise ValueError(f"num_hard must be an integer >= 1, got {num_hard!r}")


def hard_contrastive(
    query: Tensor,
    key: Tensor,
    negatives: Tensor | None = None,
    *,
    temperature: Temperature = 0.1,
    num_hard: int = 4096,
) -> Tensor:
    r"""Hard contrastive loss (Wang & Liu 2021, section 5).

    Same candidates as :func:`~contrastkit.losses.info_nce`, but the denominator keeps only the
    positive and the negatives at least as similar to the anchor as its ``num_hard``-th most
    similar negative :math:`s^{(i)}_\alpha`:

    .. math::
        L = -\frac1N \sum_i \log \frac{\exp(s_{ii}/\tau_{ii})}
            {\exp(s_{ii}/\tau_{ii}) + \sum_{j \in \mathcal N_i,\, s_{ij} \ge s^{(i)}_\alpha}
             \exp(s_{ij}/\tau_{ij})}

    with :math:`s_{ij}` the cosine similarity and :math:`\mathcal N_i` the negatives of anchor
    i (the K queue entries, or in-batch the keys :math:`j \ne i`). Hardness is the raw cosine
    similarity, also under a dynamic temperature. Exactly ``num_hard`` negatives are kept
    unless similarities tie at the threshold (then all tied ones are kept, as the paper's
    ``>=`` reads). With ``num_hard`` >= the number of negatives this is
    :func:`~contrastkit.losses.info_nce`.

    Args:
        query: (N, D) online embeddings.
        key: (N, D) positives.
        negatives: optional (K, D) queue.
        temperature: float > 0, temperature function, or ``PairTemperature``.
        num_hard: number of hardest negatives kept per anchor, >= 1.

    Returns:
        Scalar tensor, the mean over anchors.

    Raises:
        ValueError: as :func:`~contrastkit.losses.info_nce`, or ``num_hard`` < 1.
    """
    check_temperature("temperature", temperature)
    _check_num_hard(num_hard)
    pairs = prepare_pairs(query, key, negatives)
    pos_t, neg_t = split_temperature(temperature)
    pos = positive_logits(pairs.query, pairs.key, pos_t)
    available = pairs.negatives.rows.shape[0] - len(pairs.diagonals)
    hard = num_hard if num_hard < available else None
    lse, _ = negative_lse(
        pairs.query, pairs.negatives, neg_t, diagonals=pairs.diagonals, num_hard=hard
    )
    return (torch.logaddexp(pos, lse) - pos).mean()


class HardContrastiveLoss(nn.Module):
    """Module form of :func:`hard_contrastive`; arguments are validated at construction."""

    def __init__(self, *, temperature: Temperature = 0.1, num_hard: int = 4096) -> None:
        super().__init__()
        check_temperature("temperature", temperature)
        _check_num_hard(num_hard)
        self.temperature, self.num_hard = temperature, num_hard

    def forward(self, query: Tensor, key: Tensor, negatives: Tensor | None = None) -> Tensor:
        return hard_contrastive(
            query, key, negatives, temperature=self.temperature, num_hard=self.num_hard
        )

    def extra_repr(self) -> str:
        return f"temperature={self.temperature!r}, num_hard={self.num_hard}"
