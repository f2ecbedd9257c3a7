"""The fused log-sum-exp over each anchor's negatives, as one autograd function (private).

Every loss of :mod:`~contrastkit.losses.infonce`, :mod:`~contrastkit.losses.hard_contrastive`
and :mod:`~contrastkit.losses.sce` is assembled from three per-anchor quantities:

* ``pos_i``: the positive logit, a row-wise dot product of query ``i`` and key ``i`` divided
  by its temperature (O(N D), no N x N matrix; :func:`._pairs.positive_logits`);
* ``lse_i = log sum_j exp(l_ij)`` over the anchor's negatives ``j``;
* ``wdot_i = sum_j w_ij l_ij`` for a fixed target distribution ``w`` over the same negatives
  (ReSSL and SCE only).

The log-sum-exp over positive *and* negatives is then ``logaddexp(pos_i, lse_i)``: the
positive logit is never concatenated to the (possibly huge) queue logits.

``lse`` and ``wdot`` come from one fused autograd function, :class:`_NegativeLogSumExp`. It
takes the candidates (the queue, or the keys in-batch) *un-normalised* together with their
row norms and folds the normalisation into the logits (one in-place column scaling of the
N x M product), so no normalised copy of a large queue is made. It masks, applies the
temperature and takes the log-sum-exp in place on that one N x M buffer; backward applies the
per-row factor of the softmax gradient to the small (N, D) side, so for a float temperature it
makes no N x M pass at all, and folds the normalisation Jacobian into the (M, D) gradient in
place. Masked entries hold ``-inf``; they are never a whole row (every anchor keeps at least
one negative), so the row maximum is finite and no NaN appears. The inputs are float32 or
wider (:func:`contrastkit.precision.at_least_float32`); forward and backward run with autocast
off, so the logits, their products and every reduction stay in that dtype inside a
float16/bfloat16 autocast region.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from contrastkit.losses._hard_negatives import hard_mask_
from contrastkit.losses._normalize import (
    autocast_off,
    inverse_norms,
    normalize_backward_,
    rowdot,
)


@dataclass(frozen=True)
class Candidates:
    """Un-normalised candidate rows with their detached L2 norms (shape (M,)) and
    ``inverse = 1 / max(norm, eps)``, computed once here for every product that needs it."""

    rows: Tensor
    norms: Tensor
    inverse: Tensor = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inverse", inverse_norms(self.norms))


def call_temperature(temperature_fn: Callable[[Tensor], Tensor], sim: Tensor) -> Tensor:
    """``temperature_fn(sim)``, checked to be a tensor of the shape of ``sim``."""
    tau = temperature_fn(sim)
    if not isinstance(tau, Tensor) or tau.shape != sim.shape:
        raise ValueError(
            "temperature function must return a tensor of the shape of its input "
            f"{tuple(sim.shape)}, got {getattr(tau, 'shape', type(tau).__name__)}"
        )
    return tau


def _cosine_logits(anchors: Tensor, cands: Candidates) -> Tensor:
    """``anchors @ normalize(cands).T`` as one product and one in-place column scaling."""
    with autocast_off(anchors):
        logits = anchors @ cands.rows.T
    return logits.mul_(cands.inverse.to(logits.dtype))


@torch.no_grad()
def target_distribution(
    key: Tensor,
    cands: Candidates,
    temperature: float,
    diagonals: Sequence[int] = (),
    *,
    zero_logit: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Softmax over candidates of ``l_ij = key_i . c_j / temperature``, masked diagonals
    excluded, and with ``zero_logit`` the (N,) target weight of a positive given the logit 0
    beside them, ``a_i = 1 / (1 + sum_j exp(l_ij)) = sigmoid(-logsumexp_j l_ij)``, from the
    same logits (else None).

    ``key`` is normalised. Computed without gradient (the target branch of ReSSL/SCE); masked
    entries are exactly 0.
    """
    logits = _cosine_logits(key / temperature, cands)
    for offset in diagonals:
        logits.diagonal(offset).fill_(float("-inf"))
    top = logits.amax(dim=1, keepdim=True)
    probs = logits.sub_(top).exp_()  # softmax in place
    total = probs.sum(dim=1, keepdim=True)
    positive = None
    if zero_logit:  # logsumexp_j l_ij = top_i + log(total_i)
        positive = torch.sigmoid(total.log().add_(top).neg_()).squeeze(1)
    return probs.div_(total), positive


def negative_lse(
    anchors: Tensor,
    cands: Candidates,
    temperature: float | Tensor | Callable[[Tensor], Tensor],
    *,
    diagonals: Sequence[int] = (),
    num_hard: int | None = None,
    target: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Log-sum-exp of the anchors' negative logits, and ``sum_j target_ij * logit_ij``.

    Args:
        anchors: (N, D) normalised anchors.
        cands: (M, D) un-normalised candidates and their norms.
        temperature: float (or 0-d tensor), or function of the detached cosine similarities.
        diagonals: offsets of the diagonals of the (N, M) logit matrix that are *not*
            negatives (self-similarity, positives); they are masked with ``-inf``.
        num_hard: if given, keep only candidates whose cosine similarity to the anchor is at
            least the ``num_hard``-th largest among its negatives (chosen on the raw
            similarity; with a float temperature the order of the logits is the same; see
            :mod:`._hard_negatives`).
        target: (N, M) target weights without gradient, zero on masked entries.

    Returns:
        ``(lse, wdot)``, each of shape (N,). ``wdot`` is zero when ``target`` is None.
    """
    if num_hard is not None and target is not None:
        raise ValueError("num_hard and target cannot be combined")
    temperature_fn = temperature if callable(temperature) else None
    if temperature_fn is None:
        anchors = anchors / temperature  # fold 1/tau into the small (N, D) side
    return _NegativeLogSumExp.apply(
        anchors, cands.rows, cands, temperature_fn, tuple(diagonals), num_hard, target
    )


class _NegativeLogSumExp(torch.autograd.Function):
    """Fused ``(lse, wdot)`` of ``anchors @ normalize(candidates).T`` (see negative_lse)."""

    @staticmethod
    def forward(ctx, anchors, rows, cands, temperature_fn, diagonals, num_hard, target):
        norms, inverse = cands.norms, cands.inverse
        logits = _cosine_logits(anchors, cands)
        tau = None
        if temperature_fn is not None:
            tau = call_temperature(temperature_fn, logits)  # cosine similarities, no grad
        if num_hard is not None:
            hard_mask_(logits, num_hard, diagonals)  # selected on raw similarity
        if tau is not None:
            logits.div_(tau)
        if target is not None:  # before masking: target is 0 where logits become -inf
            wdot = rowdot(target, logits)
        else:
            wdot = logits.new_zeros(logits.shape[0])
        for offset in diagonals:
            logits.diagonal(offset).fill_(float("-inf"))
        row_max = logits.amax(dim=1, keepdim=True)
        exp = logits.sub_(row_max).exp_()
        total = exp.sum(dim=1, keepdim=True)
        lse = (row_max + total.log()).squeeze(1)

        ctx.plain = target is None and tau is None
        if ctx.plain:  # backward only needs exp * inv (see there)
            exp.mul_(inverse.to(exp.dtype))
        ctx.save_for_backward(anchors, rows, norms, inverse)
        ctx.exp, ctx.total, ctx.tau, ctx.target = exp, total, tau, target
        return lse, wdot

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_lse, grad_wdot):
        # G = dL/dlogits; with c_hat = c * inv: dL/da = (G * inv) @ c and
        # P = (G * inv).T @ a = inv * dL/dc_hat, turned into dL/dc in place.
        anchors, rows, norms, inverse = ctx.saved_tensors
        row_scale = grad_lse.unsqueeze(1) / ctx.total  # G = exp * row_scale (+ target term)
        if ctx.plain:  # exp already holds exp * inv; row_scale goes to the (N, D) side
            scaled = ctx.exp
        else:
            scaled = ctx.exp * row_scale
            if ctx.target is not None:
                scaled.addcmul_(ctx.target, grad_wdot.unsqueeze(1))
            if ctx.tau is not None:
                scaled.div_(ctx.tau)  # the temperature is a constant for the gradient
            scaled.mul_(inverse.to(scaled.dtype))
        grad_anchors = grad_rows = None
        with autocast_off(anchors):
            if ctx.needs_input_grad[0]:
                grad_anchors = scaled @ rows
                if ctx.plain:
                    grad_anchors = grad_anchors * row_scale
            if ctx.needs_input_grad[1]:
                right = anchors * row_scale.to(anchors.dtype) if ctx.plain else anchors
                grad_rows = scaled.T @ right
        if grad_rows is not None:
            grad_rows = normalize_backward_(grad_rows, rows, norms)
        return grad_anchors, grad_rows, None, None, None, None, None
