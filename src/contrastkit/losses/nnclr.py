r"""NNCLR (Dwibedi et al. 2021, "With a Little Help from My Friends: Nearest-Neighbor Contrastive
Learning of Visual Representations", ICCV): InfoNCE whose positive for a view is not its own
projection but that projection's nearest neighbour in a support set of past projections.

Notation: :math:`z_i, z_i^+` the projections of two views of sample i, :math:`p_i^+` the
predictor output of the second view, :math:`Q` the support set (a FIFO queue of past
projections of the whole batch), :math:`\tau` the temperature. The loss of the paper (its
eq. (2) by the baselines reference, numbering unchecked), written with cosines (every vector
L2-normalised):

.. math::
    L_i = -\log \frac{\exp(\mathrm{NN}(z_i, Q) \cdot p_i^+ / \tau)}
                     {\sum_{k=1}^{n} \exp(\mathrm{NN}(z_i, Q) \cdot p_k^+ / \tau)},
    \qquad \mathrm{NN}(z, Q) = \arg\min_{q \in Q} \lVert z - q \rVert_2

symmetrised by swapping the views; the neighbour takes no gradient. On unit vectors the nearest
in L2 distance is the most similar in cosine, which :func:`nearest_neighbours` uses.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from contrastkit.checks import check_embedding_layout, check_embeddings, check_same_dim
from contrastkit.losses._normalize import autocast_off
from contrastkit.losses.infonce import info_nce, nt_xent
from contrastkit.losses.temperature import Temperature
from contrastkit.precision import at_least_float32

__all__ = ["nearest_neighbours", "nnclr"]

_FORMS = ("info_nce", "nt_xent")


@torch.no_grad()
def nearest_neighbours(z: Tensor, support: Tensor) -> Tensor:
    r""":math:`\mathrm{NN}(z_i, Q)` for every row of ``z``: the row of ``support`` of highest
    cosine similarity (NNCLR; solo-learn ``NNCLR.find_nn``, lightly ``NNMemoryBankModule``),
    detached, as stored (a :class:`~contrastkit.methods.MemoryQueue` stores unit rows).

    Args:
        z: (N, D) projections.
        support: (M, D) support set, M >= 1.

    Returns:
        (N, D) neighbours in ``support``'s dtype.

    Raises:
        ValueError: bad shapes, an empty support set, or NaN/Inf in ``z``.
    """
    check_embeddings("z", z)
    check_embedding_layout("support", support)
    check_same_dim("z", z, "support", support)
    dtype = torch.promote_types(at_least_float32(z).dtype, at_least_float32(support).dtype)
    with autocast_off(z):
        zn = torch.nn.functional.normalize(z.detach().to(dtype), dim=1)
        qn = torch.nn.functional.normalize(support.detach().to(dtype), dim=1)
        index = (zn @ qn.t()).argmax(dim=1)
    return support.detach()[index]


def nnclr(neighbours_1: Tensor, neighbours_2: Tensor, predictions_1: Tensor,
          predictions_2: Tensor, *, temperature: Temperature = 0.1,
          form: Literal["info_nce", "nt_xent"] = "info_nce") -> Tensor:
    r"""NNCLR's symmetrised loss: the nearest neighbour of each view's projection against the
    predictions of the other view.

    ``form="info_nce"`` (the paper's equation above; solo-learn ``nnclr_loss_func``):

    .. math::
        L = \tfrac12 \big[\mathrm{InfoNCE}(\mathrm{NN}(z^1), p^2)
                         + \mathrm{InfoNCE}(\mathrm{NN}(z^2), p^1)\big]

    with :func:`~contrastkit.losses.info_nce` in-batch: anchor :math:`\mathrm{NN}(z^1_i)`,
    candidates the N predictions :math:`p^2_k`, positive :math:`p^2_i`. ``form="nt_xent"``
    (lightly's ``NNCLRModel``, whose ``NTXentLoss(nn, p)`` also puts the other neighbours and
    the other predictions of the same side among the negatives):
    :math:`\tfrac12 [\mathrm{NT\text{-}Xent}(\mathrm{NN}(z^1), p^2) +
    \mathrm{NT\text{-}Xent}(\mathrm{NN}(z^2), p^1)]` with
    :func:`~contrastkit.losses.nt_xent` (2N - 2 negatives per anchor, both sides anchors).

    Args:
        neighbours_1: (N, D) :math:`\mathrm{NN}(z^1, Q)` (:func:`nearest_neighbours`),
            detached here (stop-gradient).
        neighbours_2: (N, D) :math:`\mathrm{NN}(z^2, Q)`, detached here.
        predictions_1: (N, D) predictor outputs of view 1, with gradient.
        predictions_2: (N, D) predictor outputs of view 2, with gradient.
        temperature: :math:`\tau` (0.1 in the paper, 0.2 in solo-learn's CIFAR recipe, 0.5 as
            lightly's ``NTXentLoss`` default); what :func:`info_nce` and :func:`nt_xent` take.
        form: ``info_nce`` or ``nt_xent`` (above).

    Returns:
        Scalar tensor, in float32 at least.

    Raises:
        ValueError: an unknown ``form``, or what :func:`info_nce` / :func:`nt_xent` raise.
    """
    if form not in _FORMS:
        raise ValueError(f"form must be one of {_FORMS}, got {form!r}")
    loss = info_nce if form == "info_nce" else nt_xent
    return 0.5 * (loss(neighbours_1.detach(), predictions_2, temperature=temperature)
                  + loss(neighbours_2.detach(), predictions_1, temperature=temperature))
