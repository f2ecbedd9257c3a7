r"""Barlow Twins loss of Zbontar et al. 2021, *Barlow Twins: Self-Supervised Learning via
Redundancy Reduction* (ICML 2021, arXiv:2103.03230).

Notation: :math:`z^A, z^B` the (N, d) projections of the two views of a batch of N images,
:math:`b` indexes the batch, :math:`i, j` the d dimensions of the embedding. Unlike the
contrastive losses of this package, the embeddings are not L2-normalised: each dimension is
standardised over the batch.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from contrastkit.checks import (
    check_embeddings,
    check_non_negative_float,
    check_positive_float,
    check_same_dtype,
    check_same_shape,
)
from contrastkit.losses._matrix import off_diagonal
from contrastkit.losses._normalize import autocast_off
from contrastkit.precision import at_least_float32

__all__ = ["BarlowTwinsLoss", "barlow_twins"]


def barlow_twins(
    z1: Tensor,
    z2: Tensor,
    *,
    lambd: float = 0.0051,
    scale_loss: float = 1.0,
    eps: float = 1e-5,
) -> Tensor:
    r"""Barlow Twins loss (Zbontar et al. 2021, Sec. 2: the loss and its cross-correlation
    matrix, eqs. 1-2 of the arXiv version as we know them; the numbers are not checked against
    the paper's text).

    .. math::
        \mathcal{L}_{BT} = s \Bigl[\sum_i (1 - C_{ii})^2
                          + \lambda \sum_i \sum_{j \ne i} C_{ij}^2\Bigr],\qquad
        C_{ij} = \frac1N \sum_b \hat z^A_{b,i} \hat z^B_{b,j},\qquad
        \hat z_{b,i} = \frac{z_{b,i} - \mu_i}{\sqrt{\sigma_i^2 + \epsilon}}

    with :math:`\mu_i` and the biased variance :math:`\sigma_i^2 = \frac1N \sum_b (z_{b,i} -
    \mu_i)^2` of dimension i over the batch, each view apart: the authors' code
    (facebookresearch/barlowtwins ``main.py``), a ``BatchNorm1d(d, affine=False)`` in training
    mode on each view, then ``c = bn(z1).T @ bn(z2) / N``. With ``eps = 0`` this is the paper's
    eq. 2 exactly, the cosine of the mean-centred columns
    :math:`C_{ij} = \sum_b z^A_{b,i} z^B_{b,j} / (\|z^A_{:,i}\| \|z^B_{:,j}\|)`; the default
    ``eps`` is the batch norm's 1e-5.

    Differences between the references, as options:

    * ``scale_loss`` :math:`s` (1: the paper and the official code today). solo-learn
      multiplies the loss by its ``scale_loss`` (0.1 in its CIFAR configs, 0.024 by default);
      the maintainers advise ``196 / d`` to match their research code
      (https://github.com/facebookresearch/barlowtwins/issues/9). lightly applies none.
    * ``lambd`` :math:`\lambda`: 0.0051 (the official code since commit 046eec3, and
      solo-learn's default); lightly's default is 0.005, the official code before 046eec3
      had 3.9e-3 with a scale of 1/32.

    Several processes: pass the projections of the whole batch (gathered with gradient,
    :func:`contrastkit.distributed.gather_with_grad`), so the statistics and C are those of the
    global batch, as the official code computes them (its loss batch norm becomes a
    ``SyncBatchNorm`` and C is summed over the processes; see
    :class:`contrastkit.methods.BarlowTwins`). solo-learn instead standardises each process's
    batch with its own statistics and averages the processes' C.

    Precision: float16/bfloat16 inputs are computed on in float32, with autocast off.

    Args:
        z1: (N, d) projections of the first view.
        z2: (N, d) projections of the second view, row by row the same images.
        lambd: weight :math:`\lambda \ge 0` of the off-diagonal (redundancy reduction) term.
        scale_loss: factor :math:`s > 0` of the whole loss.
        eps: :math:`\epsilon \ge 0` added to each variance (the batch norm's).

    Returns:
        Scalar tensor (a sum over the d x d entries of C, not a mean).

    Raises:
        ValueError: bad shapes or dtypes, NaN/Inf, a batch of fewer than 2 samples, or a
            hyper-parameter out of range.
    """
    _check_views(z1, z2)
    check_non_negative_float("lambd", lambd)
    check_positive_float("scale_loss", scale_loss)
    check_non_negative_float("eps", eps)
    a, b = at_least_float32(z1), at_least_float32(z2)
    with autocast_off(a):
        c = _standardised(a, eps).T @ _standardised(b, eps) / a.shape[0]
        invariance = (torch.diagonal(c) - 1).pow(2).sum()
        redundancy = off_diagonal(c).pow(2).sum()
        return scale_loss * (invariance + lambd * redundancy)


def _check_views(z1: Tensor, z2: Tensor) -> None:
    check_embeddings("z1", z1)
    check_embeddings("z2", z2)
    check_same_shape("z1", z1, "z2", z2)
    check_same_dtype("z1", z1, "z2", z2)
    if z1.shape[0] < 2:
        raise ValueError(f"z1 has batch size {z1.shape[0]}: Barlow Twins standardises each "
                         "dimension over the batch, which needs at least 2 samples")


def _standardised(z: Tensor, eps: float) -> Tensor:
    """Each column centred and divided by sqrt(biased variance + eps) (BatchNorm1d, training
    mode, affine=False)."""
    centred = z - z.mean(dim=0)
    return centred * torch.rsqrt(centred.pow(2).mean(dim=0) + eps)


class BarlowTwinsLoss(nn.Module):
    """Module form of :func:`barlow_twins`; arguments are validated at construction."""

    def __init__(self, *, lambd: float = 0.0051, scale_loss: float = 1.0,
                 eps: float = 1e-5) -> None:
        super().__init__()
        check_non_negative_float("lambd", lambd)
        check_positive_float("scale_loss", scale_loss)
        check_non_negative_float("eps", eps)
        self.lambd, self.scale_loss, self.eps = lambd, scale_loss, eps

    def forward(self, z1: Tensor, z2: Tensor) -> Tensor:
        return barlow_twins(z1, z2, lambd=self.lambd, scale_loss=self.scale_loss, eps=self.eps)

    def extra_repr(self) -> str:
        return f"lambd={self.lambd!r}, scale_loss={self.scale_loss!r}, eps={self.eps!r}"
