r"""VICReg loss of Bardes, Ponce & LeCun 2022, *VICReg: Variance-Invariance-Covariance
Regularization for Self-Supervised Learning* (ICLR 2022, arXiv:2105.04906).

Notation: :math:`Z, Z'` the (n, d) embeddings ("expander" outputs) of the two views of a batch
of n images, :math:`z^j` the column of dimension j. The embeddings are not normalised.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastkit.checks import (
    check_embeddings,
    check_non_negative_float,
    check_positive_float,
    check_same_dim,
    check_same_dtype,
    check_same_shape,
)
from contrastkit.losses._matrix import off_diagonal
from contrastkit.losses._normalize import autocast_off
from contrastkit.precision import at_least_float32

__all__ = ["VICRegLoss", "vicreg", "vicreg_terms"]


def vicreg_terms(
    z1: Tensor,
    z2: Tensor,
    *,
    global_views: tuple[Tensor, Tensor] | None = None,
    halve_variance: bool = True,
    gamma: float = 1.0,
    eps: float = 1e-4,
) -> dict[str, Tensor]:
    r"""The three unweighted terms of the VICReg loss (Bardes et al. 2022, Sec. 3.2: eqs. 1-5
    of the arXiv version as we know them; the numbers are not checked against the paper's
    text), as the authors' code (facebookresearch/vicreg ``main_vicreg.py``) computes them.

    * ``'invariance'``: the mean squared error over all n x d elements,
      :math:`s = \frac{1}{n d} \sum_i \|z_i - z'_i\|^2`. The paper's eq. 5 prints
      :math:`\frac1n \sum_i \|z_i - z'_i\|^2` (no 1/d); the code, solo-learn and lightly take
      the mean over the elements (``F.mse_loss``), whose weight the paper's
      :math:`\lambda = 25` is: we follow the code.
    * ``'variance'``: a hinge on each dimension's regularised standard deviation,
      :math:`v(Z) = \frac1d \sum_j \max(0, \gamma - \sqrt{\mathrm{Var}(z^j) + \epsilon})`
      with the unbiased variance (n - 1), for both views: :math:`(v(Z) + v(Z')) / 2` with
      ``halve_variance`` (the official code and lightly), :math:`v(Z) + v(Z')` without (the
      paper's eq. 6 and solo-learn, so twice the official variance weight).
    * ``'covariance'``: the off-diagonal squares of each view's covariance matrix
      :math:`C(Z) = \frac{1}{n-1} \sum_i (z_i - \bar z)(z_i - \bar z)^\top` over d,
      :math:`c(Z) + c(Z')` with :math:`c(Z) = \frac1d \sum_{i \ne j} C(Z)_{ij}^2`.

    Several processes: the official code computes the invariance on each process's own rows
    and the variance and covariance on the batch gathered from every process (with gradient).
    Pass the local rows as ``z1``, ``z2`` and the gathered ones as ``global_views``
    (:func:`contrastkit.distributed.gather_with_grad`); DDP's average of the processes'
    gradients is then the one-process gradient on the whole batch.

    Precision: float16/bfloat16 inputs are computed on in float32, with autocast off.

    Args:
        z1: (n, d) embeddings of the first view.
        z2: (n, d) embeddings of the second view, row by row the same images.
        global_views: the (N, d) embeddings of both views over every process, for the
            variance and covariance terms; None: ``z1`` and ``z2``.
        halve_variance: average the two views' variance terms (official code) instead of
            summing them (paper's eq. 6).
        gamma: target standard deviation :math:`\gamma > 0`.
        eps: :math:`\epsilon \ge 0` added to each variance.

    Returns:
        Dict of three scalar tensors: ``'invariance'``, ``'variance'``, ``'covariance'``.

    Raises:
        ValueError: bad shapes or dtypes, NaN/Inf, a batch of fewer than 2 samples, or a
            hyper-parameter out of range.
    """
    check_positive_float("gamma", gamma)
    check_non_negative_float("eps", eps)
    _check_pair("z1", z1, "z2", z2)
    g1, g2 = (z1, z2) if global_views is None else global_views
    if global_views is not None:
        _check_pair("global_views[0]", g1, "global_views[1]", g2)
        check_same_dim("z1", z1, "global_views[0]", g1)
    a, b = at_least_float32(z1), at_least_float32(z2)
    g1, g2 = at_least_float32(g1), at_least_float32(g2)
    with autocast_off(a):
        variance = _variance(g1, gamma, eps) + _variance(g2, gamma, eps)
        return {
            "invariance": F.mse_loss(a, b),
            "variance": variance / 2 if halve_variance else variance,
            "covariance": _covariance(g1) + _covariance(g2),
        }


def vicreg(
    z1: Tensor,
    z2: Tensor,
    *,
    sim_coeff: float = 25.0,
    std_coeff: float = 25.0,
    cov_coeff: float = 1.0,
    global_views: tuple[Tensor, Tensor] | None = None,
    halve_variance: bool = True,
    gamma: float = 1.0,
    eps: float = 1e-4,
) -> Tensor:
    r"""VICReg loss (Bardes et al. 2022, Sec. 3.2, eq. 6 of the arXiv version as we know it):

    .. math::
        \ell = \lambda\, s(Z, Z') + \mu\, v + \nu\, [c(Z) + c(Z')]

    with the terms of :func:`vicreg_terms` (``v`` halved by default, as the official code
    does; the paper's eq. 6 reads :math:`\mu [v(Z) + v(Z')]`: ``halve_variance=False``), and
    the paper's weights :math:`\lambda = \mu = 25`, :math:`\nu = 1`.

    Args:
        z1, z2, global_views, halve_variance, gamma, eps: as in :func:`vicreg_terms`.
        sim_coeff: invariance weight :math:`\lambda \ge 0`.
        std_coeff: variance weight :math:`\mu \ge 0`.
        cov_coeff: covariance weight :math:`\nu \ge 0`.

    Returns:
        Scalar tensor.
    """
    for name, value in (("sim_coeff", sim_coeff), ("std_coeff", std_coeff),
                        ("cov_coeff", cov_coeff)):
        check_non_negative_float(name, value)
    terms = vicreg_terms(z1, z2, global_views=global_views, halve_variance=halve_variance,
                         gamma=gamma, eps=eps)
    return (sim_coeff * terms["invariance"] + std_coeff * terms["variance"]
            + cov_coeff * terms["covariance"])


def _check_pair(name_a: str, a: Tensor, name_b: str, b: Tensor) -> None:
    check_embeddings(name_a, a)
    check_embeddings(name_b, b)
    check_same_shape(name_a, a, name_b, b)
    check_same_dtype(name_a, a, name_b, b)
    if a.shape[0] < 2:
        raise ValueError(f"{name_a} has batch size {a.shape[0]}: VICReg's variance and "
                         "covariance over the batch need at least 2 samples")


def _variance(z: Tensor, gamma: float, eps: float) -> Tensor:
    """v(Z): the mean over dimensions of the hinge max(0, gamma - sqrt(Var + eps))."""
    std = torch.sqrt(z.var(dim=0) + eps)
    return F.relu(gamma - std).mean()


def _covariance(z: Tensor) -> Tensor:
    """c(Z): the off-diagonal squares of the unbiased covariance matrix, summed, over d."""
    n, d = z.shape
    centred = z - z.mean(dim=0)
    cov = centred.T @ centred / (n - 1)
    return off_diagonal(cov).pow(2).sum() / d


class VICRegLoss(nn.Module):
    """Module form of :func:`vicreg`; arguments are validated at construction."""

    def __init__(self, *, sim_coeff: float = 25.0, std_coeff: float = 25.0,
                 cov_coeff: float = 1.0, halve_variance: bool = True, gamma: float = 1.0,
                 eps: float = 1e-4) -> None:
        super().__init__()
        for name, value in (("sim_coeff", sim_coeff), ("std_coeff", std_coeff),
                            ("cov_coeff", cov_coeff), ("eps", eps)):
            check_non_negative_float(name, value)
        check_positive_float("gamma", gamma)
        self.sim_coeff, self.std_coeff, self.cov_coeff = sim_coeff, std_coeff, cov_coeff
        self.halve_variance, self.gamma, self.eps = halve_variance, gamma, eps

    def forward(self, z1: Tensor, z2: Tensor) -> Tensor:
        return vicreg(z1, z2, sim_coeff=self.sim_coeff, std_coeff=self.std_coeff,
                      cov_coeff=self.cov_coeff, halve_variance=self.halve_variance,
                      gamma=self.gamma, eps=self.eps)

    def extra_repr(self) -> str:
        return (f"sim_coeff={self.sim_coeff!r}, std_coeff={self.std_coeff!r}, "
                f"cov_coeff={self.cov_coeff!r}, halve_variance={self.halve_variance!r}")
