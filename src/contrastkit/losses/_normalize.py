"""Row-wise L2 normalisation as one autograd function, with the NaN/Inf check (private).

``x_hat = x / max(|x|, eps)`` row by row, the ``eps`` of ``F.normalize``. The row norms are
computed once (detached, in float32 at least), checked for NaN/Inf instead of scanning ``x`` a
second time, and reused by the fused log-sum-exp (:mod:`._logsumexp`), which folds the
normalisation of large candidate sets into its logits and its gradient instead of making a
normalised copy.

Precision: the losses compute in float32 or wider whatever the inputs and an enclosing
autocast region: float16/bfloat16 embeddings are cast up first
(:func:`contrastkit.precision.at_least_float32`, an
exact cast whose gradient comes back in the input's dtype) and every product of the loss, the
logits included, runs with autocast off (:func:`autocast_off`). bf16 would round cosines near 1
by about 0.002, about 0.05 on a logit at a target temperature of 0.04; the loss's products are
small next to the network's, so float32 costs little.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from contrastkit.checks import check_embeddings
from contrastkit.hot_path import in_hot_path
from contrastkit.precision import compute_dtype

EPS = 1e-12  # the eps of F.normalize: rows are divided by max(norm, eps)


def autocast_off(x: Tensor) -> torch.autocast:
    """A region without autocast on ``x``'s device: products run in their inputs' dtype."""
    return torch.autocast(x.device.type, enabled=False)


def checked_norms(name: str, x: Tensor) -> Tensor:
    """Detached row L2 norms of ``x``; raise ``ValueError`` if ``x`` holds NaN/Inf.

    The check reads the norms (a NaN or Inf entry makes its row's norm non-finite) instead of
    scanning ``x`` a second time; inside :func:`contrastkit.hot_path.hot_path` it is skipped
    (a non-finite input then gives a non-finite loss, which the engine reports).
    """
    norms = torch.linalg.vector_norm(x.detach(), dim=-1, dtype=compute_dtype(x.dtype))
    if not in_hot_path() and not bool(torch.isfinite(norms).all()):
        check_embeddings(name, x)  # raises, naming the NaN/Inf
        raise ValueError(f"{name} has a row whose L2 norm overflows {norms.dtype}")
    return norms


def normalize_checked(name: str, x: Tensor) -> tuple[Tensor, Tensor]:
    """``(F.normalize(x, dim=-1), row norms)`` with the NaN/Inf check of :func:`checked_norms`."""
    norms = checked_norms(name, x)
    return _L2Normalize.apply(x, norms), norms


def inverse_norms(norms: Tensor) -> Tensor:
    """``1 / max(norm, eps)`` per row (one ``reciprocal``: ``1.0 / t`` would dispatch a
    ``reciprocal`` and a multiplication by 1)."""
    return torch.reciprocal(norms.clamp_min(EPS))


def normalize_backward_(grad_hat_scaled: Tensor, x: Tensor, norms: Tensor) -> Tensor:
    """Turn ``P = inv * dL/dx_hat`` into ``dL/dx`` in place, for ``x_hat = x * inv``.

    ``dL/dx = inv * (g - x_hat (g . x_hat)) = P - x * inv^2 (P . x)``; rows whose norm was
    clamped to eps have a constant denominator, hence ``dL/dx = P``.
    """
    inv = inverse_norms(norms)
    coef = torch.where(norms >= EPS, inv * inv * rowdot(grad_hat_scaled, x), 0.0)
    return grad_hat_scaled.addcmul_(x, coef.unsqueeze(1).to(x.dtype), value=-1)


class _L2Normalize(torch.autograd.Function):
    """``x / max(|x|, eps)`` row-wise, with a backward of three passes over ``x``."""

    @staticmethod
    def forward(ctx, x, norms):
        ctx.save_for_backward(x, norms)
        return x * inverse_norms(norms).unsqueeze(1).to(x.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, norms = ctx.saved_tensors
        scaled = grad * inverse_norms(norms).unsqueeze(1).to(grad.dtype)
        return normalize_backward_(scaled, x, norms), None


def rowdot(a: Tensor, b: Tensor) -> Tensor:
    """Row-wise dot products of two (R, C) tensors, shape (R,), without an (R, C) temporary
    (in the inputs' dtype, also inside autocast)."""
    with autocast_off(a):
        return torch.bmm(a.unsqueeze(1), b.unsqueeze(2)).view(-1)
