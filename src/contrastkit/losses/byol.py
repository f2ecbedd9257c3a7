r"""BYOL's regression loss (Grill et al. 2020, *Bootstrap Your Own Latent*, NeurIPS 2020).

The online network's prediction :math:`q_\theta(z_\theta)` of one view regresses the target
network's projection :math:`z'_\xi` of the other view, both L2-normalised:

.. math::
    \mathcal{L}_{\theta,\xi} = \bigl\| \bar q_\theta(z_\theta) - \bar z'_\xi \bigr\|_2^2
        = 2 - 2 \frac{\langle q_\theta(z_\theta), z'_\xi \rangle}
                     {\|q_\theta(z_\theta)\|_2 \, \|z'_\xi\|_2}

(eq. 2 of the arXiv version), minimised with respect to the online parameters :math:`\theta`
only (eq. 3: a stop-gradient on the target). :func:`byol` is one direction, averaged over the
batch; the method (:class:`contrastkit.methods.BYOL`) symmetrises it, as eq. 3's
:math:`\mathcal{L} + \tilde{\mathcal{L}}` and the official code (deepmind-research
``byol/byol_experiment.py``, ``loss_fn``: the sum of the two directions) do.
"""

from __future__ import annotations

from torch import Tensor, nn

from contrastkit.checks import check_embedding_layout, check_same_dtype, check_same_shape
from contrastkit.losses._normalize import normalize_checked, rowdot
from contrastkit.precision import at_least_float32

__all__ = ["BYOLLoss", "byol"]


def byol(prediction: Tensor, target: Tensor) -> Tensor:
    r"""BYOL's loss of one direction (Grill et al. 2020, eq. 2), with the stop-gradient of eq. 3.

    .. math::
        L = \frac1N \sum_{i=1}^N \Bigl( 2 - 2 \cos(p_i, z_i) \Bigr)

    the mean over the batch of the squared distance between the L2-normalised prediction
    :math:`p_i` (online branch) and target projection :math:`z_i` (the other view through the
    EMA target branch). ``target`` is detached here: only the prediction receives a gradient.
    Computed in float32 or wider, whatever the inputs and an enclosing autocast region.

    Args:
        prediction: (N, D) online predictions.
        target: (N, D) target projections of the other view, row by row.

    Returns:
        Scalar tensor in [0, 4], the mean over the N pairs.

    Raises:
        ValueError: bad shapes, mixed dtypes or NaN/Inf.
    """
    check_embedding_layout("prediction", prediction)
    check_embedding_layout("target", target)
    check_same_shape("prediction", prediction, "target", target)
    check_same_dtype("prediction", prediction, "target", target)
    p_hat, _ = normalize_checked("prediction", at_least_float32(prediction))
    z_hat, _ = normalize_checked("target", at_least_float32(target.detach()))
    return 2.0 - 2.0 * rowdot(p_hat, z_hat).mean()


class BYOLLoss(nn.Module):
    """Module form of :func:`byol` (one direction)."""

    def forward(self, prediction: Tensor, target: Tensor) -> Tensor:
        return byol(prediction, target)
