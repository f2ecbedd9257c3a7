r"""W-MSE (Ermolov, Siarohin, Sangineto & Sebe 2021, *Whitening for Self-Supervised
Representation Learning*, ICML 2021).

The embeddings of each view are whitened over random sub-batches of ``w_size`` rows, then the
positive pairs are pulled together by the MSE of their L2-normalised whitened vectors. For a
sub-batch :math:`V` (w rows, d columns) with mean :math:`\mu_V` and covariance
:math:`\Sigma_V = \frac1{w-1} \sum_i (v_i - \mu_V)(v_i - \mu_V)^\top`,

.. math::
    z_i = W_V (v_i - \mu_V), \qquad W_V = L_V^{-1}, \quad
    (1 - \epsilon) \Sigma_V + \epsilon I = L_V L_V^\top \ \text{(Cholesky)},

so that the whitened sub-batch has the identity covariance, and

.. math::
    L = \frac1{T} \sum_{t=1}^{T} \frac1N \sum_{i=1}^N
        \Bigl\| \bar z^{1,t}_i - \bar z^{2,t}_i \Bigr\|_2^2
      = \frac1{T} \sum_{t=1}^{T} \Bigl( 2 - \frac2N \sum_{i=1}^N
        \cos(z^{1,t}_i, z^{2,t}_i) \Bigr)

with :math:`T` = ``w_iter`` draws of the sub-batches (each draw a random partition of the N
rows into N / w_size sub-batches; each view is whitened with its own sub-batch statistics, the
two views using the same rows). This is the official code's computation (htdt/self-supervised
@ d9662c8, ``methods/w_mse.py``, ``methods/whitening.py``, ``methods/norm_mse.py``): covariance
over ``w - 1``, the shrinkage ``(1 - eps) cov + eps I`` (``--w_eps``, 0 by default), gradient
through the whitening of both views. Two views (W-MSE 2); W-MSE 4's four views are not
offered.

Known differences between the references, both offered here:

* ``detach_second=False`` (the default) is the official code: both views' whitened vectors
  receive a gradient.
* ``detach_second=True`` is solo-learn's ``wmse_loss_func(z1, z2, simplified=True)`` (its
  default, used by its W-MSE method; vturrisi/solo-learn ``solo/losses/wmse.py``):
  ``2 - 2 cos(z1, z2.detach())``, so only the first view of each pair gets a gradient; the
  loss value is the same.

Precision: the whitening (covariance, Cholesky factor, triangular solve) runs in float32 or
wider whatever the inputs and an enclosing autocast region (solo-learn forces float32 with
``custom_fwd(cast_inputs=torch.float32)``; a bf16 Cholesky is not accurate enough).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastkit.checks import (
    check_embedding_layout,
    check_same_dtype,
    check_same_shape,
    check_unit_interval,
)
from contrastkit.hot_path import in_hot_path
from contrastkit.losses._normalize import autocast_off, checked_norms
from contrastkit.precision import at_least_float32

__all__ = ["WMSELoss", "draw_sub_batches", "wmse"]


def draw_sub_batches(
    n: int, w_size: int, w_iter: int = 1, *, device: torch.device | str | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``w_iter`` random partitions of ``n`` rows into sub-batches of ``w_size``, as the official
    code draws them (``torch.randperm(n).view(-1, w_size)`` per iteration).

    Returns:
        int64 tensor of shape ``(w_iter, n // w_size, w_size)``.

    Raises:
        ValueError: if ``w_size`` does not divide ``n`` or ``w_iter`` < 1.
    """
    _check_sizes(n, w_size, w_iter)
    return torch.stack([torch.randperm(n, device=device, generator=generator)
                        for _ in range(w_iter)]).view(w_iter, n // w_size, w_size)


def _check_sizes(n: int, w_size: int, w_iter: int) -> None:
    for name, value in (("w_size", w_size), ("w_iter", w_iter)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if n % w_size:
        raise ValueError(f"w_size {w_size} must divide the batch of {n} rows (the sub-batches "
                         "partition the batch)")


def _whiten(v: Tensor, eps: float) -> Tensor:
    """Whiten each sub-batch of ``v`` (K, w, d) with its own mean and Cholesky factor."""
    w, d = v.shape[1], v.shape[2]
    centred = v - v.mean(dim=1, keepdim=True)
    cov = centred.transpose(1, 2) @ centred / (w - 1)
    if eps:
        eye = torch.eye(d, dtype=cov.dtype, device=cov.device)
        cov = (1.0 - eps) * cov + eps * eye
    chol, info = torch.linalg.cholesky_ex(cov)  # no host read (cholesky would check info)
    if in_hot_path():  # a failed factor becomes NaN, which the engine's non-finite check reports
        chol = torch.where((info == 0).view(-1, 1, 1), chol, torch.nan)
    elif bool((info != 0).any()):
        raise ValueError(
            f"W-MSE whitening: the covariance of a sub-batch of {w} rows is not positive "
            f"definite (embedding dimension {d}: collapsed embeddings, or w_size too close to "
            "the dimension; lightly asks w_size >= 2 * dim; eps > 0 shrinks it towards the "
            "identity)")
    # z_i = L^{-1} (v_i - mu): one triangular solve for the whole sub-batch
    return torch.linalg.solve_triangular(chol, centred.transpose(1, 2), upper=False
                                         ).transpose(1, 2)


def wmse(
    z1: Tensor,
    z2: Tensor,
    *,
    w_size: int | None = None,
    w_iter: int = 1,
    eps: float = 0.0,
    detach_second: bool = False,
    sub_batches: Tensor | None = None,
) -> Tensor:
    r"""W-MSE loss of two views (Ermolov et al. 2021; the module docstring gives the formula).

    Args:
        z1: (N, D) projections of the first views.
        z2: (N, D) projections of the second views, row by row.
        w_size: rows of a whitening sub-batch; must divide N and exceed D (a covariance of w
            rows has rank at most w - 1; lightly's ``WMSELoss`` asks ``w_size >= 2 D``).
            ``None``: the whole batch (the official code's default when ``--w_size`` is unset).
        w_iter: draws of the sub-batches, averaged (the official ``--w_iter``).
        eps: shrinkage of the covariance towards the identity, in [0, 1] (``--w_eps``).
        detach_second: solo-learn's form, ``2 - 2 cos(z1, z2.detach())`` (see the module
            docstring); False: the official code's.
        sub_batches: the partitions to use, int64 of shape (w_iter, N / w_size, w_size), each
            iteration a permutation of the N rows (:func:`draw_sub_batches`; a method under
            DDP draws them once and shares them); ``None`` draws them here.

    Returns:
        Scalar tensor in [0, 4].

    Raises:
        ValueError: bad shapes/dtypes, NaN/Inf, a ``w_size`` that does not divide N or does not
            exceed D, bad ``sub_batches``, or a covariance that is not positive definite.
    """
    check_embedding_layout("z1", z1)
    check_embedding_layout("z2", z2)
    check_same_shape("z1", z1, "z2", z2)
    check_same_dtype("z1", z1, "z2", z2)
    check_unit_interval("eps", eps)
    n, d = z1.shape
    w_size = n if w_size is None else w_size
    _check_sizes(n, w_size, w_iter)
    if w_size <= d:
        raise ValueError(f"w_size {w_size} must exceed the embedding dimension {d} (a "
                         f"covariance of {w_size} rows has rank at most {w_size - 1})")
    if sub_batches is None:
        sub_batches = draw_sub_batches(n, w_size, w_iter, device=z1.device)
    else:
        _check_sub_batches(sub_batches, n, w_size, w_iter)
    z1, z2 = at_least_float32(z1), at_least_float32(z2)
    checked_norms("z1", z1)  # NaN/Inf check (skipped in the training step)
    checked_norms("z2", z2)
    if detach_second:  # z2's whitening uses z2 alone: detaching before it is the same
        z2 = z2.detach()
    with autocast_off(z1):
        losses = []
        for rows in sub_batches:  # one partition (K, w_size) per iteration
            a = F.normalize(_whiten(z1[rows], eps), dim=-1)
            b = F.normalize(_whiten(z2[rows], eps), dim=-1)
            losses.append(2.0 - 2.0 * (a * b).sum(dim=-1).mean())
    return losses[0] if len(losses) == 1 else torch.stack(losses).mean()


def _check_sub_batches(sub_batches: Tensor, n: int, w_size: int, w_iter: int) -> None:
    shape = (w_iter, n // w_size, w_size)
    if not isinstance(sub_batches, Tensor) or tuple(sub_batches.shape) != shape or (
            sub_batches.dtype != torch.int64):
        got = (f"{sub_batches.dtype} of shape {tuple(sub_batches.shape)}"
               if isinstance(sub_batches, Tensor) else type(sub_batches).__name__)
        raise ValueError(f"sub_batches must be an int64 tensor of shape {shape}, got {got}")
    if not in_hot_path():
        rows = torch.arange(n, device=sub_batches.device)
        if not bool((sub_batches.reshape(w_iter, n).sort(dim=1).values == rows).all()):
            raise ValueError(f"sub_batches: each iteration must be a permutation of the {n} "
                             "rows")


class WMSELoss(nn.Module):
    """Module form of :func:`wmse`; arguments are validated at construction."""

    def __init__(self, *, w_size: int | None = None, w_iter: int = 1, eps: float = 0.0,
                 detach_second: bool = False) -> None:
        super().__init__()
        if w_size is not None:
            _check_sizes(w_size, w_size, w_iter)
        else:
            _check_sizes(1, 1, w_iter)
        check_unit_interval("eps", eps)
        self.w_size, self.w_iter, self.eps = w_size, w_iter, eps
        self.detach_second = detach_second

    def forward(self, z1: Tensor, z2: Tensor) -> Tensor:
        return wmse(z1, z2, w_size=self.w_size, w_iter=self.w_iter, eps=self.eps,
                    detach_second=self.detach_second)

    def extra_repr(self) -> str:
        return (f"w_size={self.w_size!r}, w_iter={self.w_iter!r}, eps={self.eps!r}, "
                f"detach_second={self.detach_second!r}")
