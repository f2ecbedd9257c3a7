"""Shared numerics of the self-supervised contrastive losses (private).

Every loss in :mod:`~contrastkit.losses.infonce` and :mod:`~contrastkit.losses.sce` is
assembled from three per-anchor quantities:

* ``pos_i``: the positive logit, a row-wise dot product of query ``i`` and key ``i`` divided
  by its temperature (O(N D), no N x N matrix);
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
one negative), so the row maximum is finite and no NaN appears. Under float16/bfloat16
autocast the products run in low precision but the logits are up-cast to float32 before any
exponential or reduction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable
from torch.nn.utils.rnn import pad_sequence

from contrastkit.hot_path import in_hot_path
from contrastkit.losses._checks import (
    TemperatureFn,
    check_batch_has_negatives,
    check_embedding_layout,
    check_embeddings,
    check_same_dim,
    check_same_shape,
    check_temperature_value,
)
from contrastkit.losses.temperature import PairTemperature

Temperature = float | TemperatureFn | PairTemperature

_LOW_PRECISION = (torch.float16, torch.bfloat16)
_EPS = 1e-12  # the eps of F.normalize: rows are divided by max(norm, eps)


# ---------------------------------------------------------------- arguments


def check_temperature(name: str, temperature: object) -> None:
    """Raise ``ValueError`` unless ``temperature`` is a float > 0 (or a 0-d float tensor), a
    callable or a pair."""
    if isinstance(temperature, PairTemperature) or (
        callable(temperature) and not isinstance(temperature, Tensor)
    ):
        return  # a PairTemperature validates itself
    check_temperature_value(name, temperature)  # type: ignore[arg-type]


def split_temperature(
    temperature: Temperature,
) -> tuple[float | TemperatureFn, float | TemperatureFn]:
    """Return the (positive, negative) temperatures of ``temperature``."""
    if isinstance(temperature, PairTemperature):
        return temperature.positive, temperature.negative
    return temperature, temperature


def check_same_dtype(name_a: str, a: Tensor, name_b: str, b: Tensor) -> None:
    """Raise ``ValueError`` unless ``a`` and ``b`` have the same dtype."""
    if a.dtype != b.dtype:
        raise ValueError(f"{name_b} must have the dtype of {name_a} ({a.dtype}), got {b.dtype}")


@dataclass(frozen=True)
class Candidates:
    """Un-normalised candidate rows with their detached L2 norms (shape (M,))."""

    rows: Tensor
    norms: Tensor


@dataclass(frozen=True)
class Pairs:
    """Normalised query/key and the negatives of each anchor.

    ``diagonals`` lists the diagonals of the (N, M) logit matrix that are not negatives
    (in-batch: the anchor's own key, offset 0).
    """

    query: Tensor
    key: Tensor
    negatives: Candidates
    diagonals: tuple[int, ...]


def prepare_pairs(query: Tensor, key: Tensor, negatives: Tensor | None) -> Pairs:
    """Validate query/key (and optional negatives); normalise query and key.

    In-batch (``negatives`` None) the negatives of anchor i are the keys j != i.

    Raises:
        ValueError: on bad shapes, NaN/Inf, mixed dtypes, or a batch of one without
            ``negatives`` (in-batch negatives need at least two samples).
    """
    check_embedding_layout("query", query)
    check_embedding_layout("key", key)
    check_same_shape("query", query, "key", key)
    check_same_dtype("query", query, "key", key)
    if negatives is None:
        check_batch_has_negatives("query", query)
    else:
        check_embedding_layout("negatives", negatives)
        check_same_dim("query", query, "negatives", negatives)
        check_same_dtype("query", query, "negatives", negatives)
    query_hat, _ = normalize_checked("query", query)
    key_hat, key_norms = normalize_checked("key", key)
    if negatives is None:
        return Pairs(query_hat, key_hat, Candidates(key, key_norms), (0,))
    cands = Candidates(negatives, checked_norms("negatives", negatives))
    return Pairs(query_hat, key_hat, cands, ())


# ---------------------------------------------------------------- normalisation


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in _LOW_PRECISION else dtype


def checked_norms(name: str, x: Tensor) -> Tensor:
    """Detached row L2 norms of ``x``; raise ``ValueError`` if ``x`` holds NaN/Inf.

    The check reads the norms (a NaN or Inf entry makes its row's norm non-finite) instead of
    scanning ``x`` a second time; inside :func:`contrastkit.hot_path.hot_path` it is skipped
    (a non-finite input then gives a non-finite loss, which the engine reports).
    """
    norms = torch.linalg.vector_norm(x.detach(), dim=-1, dtype=_compute_dtype(x.dtype))
    if not in_hot_path() and not bool(torch.isfinite(norms).all()):
        check_embeddings(name, x)  # raises, naming the NaN/Inf
        raise ValueError(f"{name} has a row whose L2 norm overflows {norms.dtype}")
    return norms


def normalize_checked(name: str, x: Tensor) -> tuple[Tensor, Tensor]:
    """``(F.normalize(x, dim=-1), row norms)`` with the NaN/Inf check of :func:`checked_norms`."""
    norms = checked_norms(name, x)
    return _L2Normalize.apply(x, norms), norms


def _inverse_norms(norms: Tensor) -> Tensor:
    return 1.0 / norms.clamp_min(_EPS)


def _normalize_backward_(grad_hat_scaled: Tensor, x: Tensor, norms: Tensor) -> Tensor:
    """Turn ``P = inv * dL/dx_hat`` into ``dL/dx`` in place, for ``x_hat = x * inv``.

    ``dL/dx = inv * (g - x_hat (g . x_hat)) = P - x * inv^2 (P . x)``; rows whose norm was
    clamped to eps have a constant denominator, hence ``dL/dx = P``.
    """
    inv = _inverse_norms(norms)
    coef = torch.where(norms >= _EPS, inv * inv * rowdot(grad_hat_scaled, x), 0.0)
    return grad_hat_scaled.addcmul_(x, coef.unsqueeze(1).to(x.dtype), value=-1)


class _L2Normalize(torch.autograd.Function):
    """``x / max(|x|, eps)`` row-wise, with a backward of three passes over ``x``."""

    @staticmethod
    def forward(ctx, x, norms):
        ctx.save_for_backward(x, norms)
        return x * _inverse_norms(norms).unsqueeze(1).to(x.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, norms = ctx.saved_tensors
        scaled = grad * _inverse_norms(norms).unsqueeze(1).to(grad.dtype)
        return _normalize_backward_(scaled, x, norms), None


def rowdot(a: Tensor, b: Tensor) -> Tensor:
    """Row-wise dot products of two (R, C) tensors, shape (R,), without an (R, C) temporary."""
    return torch.bmm(a.unsqueeze(1), b.unsqueeze(2)).view(-1)


# ---------------------------------------------------------------- logits


def positive_logits(query: Tensor, key: Tensor, temperature: float | TemperatureFn) -> Tensor:
    """Row-wise ``(query_i . key_i) / tau`` for normalised inputs; ``tau`` a float or a
    function of the detached similarity. Shape (N,), float32 or wider."""
    sim = rowdot(query, key)
    sim = sim.to(_compute_dtype(sim.dtype))
    if callable(temperature):
        return sim / _call_temperature(temperature, sim.detach())
    return sim / temperature


def _call_temperature(temperature_fn: TemperatureFn, sim: Tensor) -> Tensor:
    tau = temperature_fn(sim)
    if not isinstance(tau, Tensor) or tau.shape != sim.shape:
        raise ValueError(
            "temperature function must return a tensor of the shape of its input "
            f"{tuple(sim.shape)}, got {getattr(tau, 'shape', type(tau).__name__)}"
        )
    return tau


def _cosine_logits(anchors: Tensor, cands: Candidates) -> Tensor:
    """``anchors @ normalize(cands).T`` as one product and one in-place column scaling."""
    logits = anchors @ cands.rows.T
    logits = logits.to(_compute_dtype(logits.dtype))  # no copy unless low precision
    return logits.mul_(_inverse_norms(cands.norms).to(logits.dtype))


@torch.no_grad()
def target_distribution(
    key: Tensor, cands: Candidates, temperature: float, diagonals: Sequence[int] = ()
) -> Tensor:
    """Softmax over candidates of ``key_i . c_j / temperature``, masked diagonals excluded.

    ``key`` is normalised. Computed without gradient (the target branch of ReSSL/SCE); masked
    entries are exactly 0.
    """
    logits = _cosine_logits(key / temperature, cands)
    for offset in diagonals:
        logits.diagonal(offset).fill_(float("-inf"))
    probs = logits.sub_(logits.amax(dim=1, keepdim=True)).exp_()  # softmax in place
    return probs.div_(probs.sum(dim=1, keepdim=True))


def negative_lse(
    anchors: Tensor,
    cands: Candidates,
    temperature: float | TemperatureFn,
    *,
    diagonals: Sequence[int] = (),
    num_hard: int | None = None,
    target: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Log-sum-exp of the anchors' negative logits, and ``sum_j target_ij * logit_ij``.

    Args:
        anchors: (N, D) normalised anchors.
        cands: (M, D) un-normalised candidates and their norms.
        temperature: float, or function of the detached cosine similarities.
        diagonals: offsets of the diagonals of the (N, M) logit matrix that are *not*
            negatives (self-similarity, positives); they are masked with ``-inf``.
        num_hard: if given, keep only candidates whose cosine similarity to the anchor is at
            least the ``num_hard``-th largest among its negatives (chosen on the raw
            similarity; with a float temperature the order of the logits is the same).
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
        anchors, cands.rows, cands.norms, temperature_fn, tuple(diagonals), num_hard, target
    )


def _autocast_dtype(device_type: str) -> torch.dtype | None:
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return None


# ---------------------------------------------------------------- hard negatives
#
# The hard contrastive loss keeps, per row, the entries >= the row's num_hard-th largest. An
# exact torch.topk over the whole N x M matrix is the slow part (it copies every entry into a
# (value, index) pair and runs nth_element on them). Instead, rows are processed in blocks of
# ~_SELECT_BLOCK entries (kept in cache), and per block:
#
# 1. a strided sample of ~_SELECT_SAMPLE columns brackets the threshold: ``lo <= hi`` are two
#    order statistics of the sample, _SELECT_Z standard deviations either side of the rank the
#    threshold is expected at;
# 2. counting ``s > hi`` and ``lo <= s <= hi`` over the row *checks* the bracket exactly: the
#    threshold is in it iff count(s > hi) < num_hard <= count(s >= lo). Rows that fail (an
#    unlucky sample, ties, NaN) fall back to topk, so the result never depends on the sample;
# 3. the few entries inside the bracket are gathered and the exact threshold taken among them
#    (a topk on a block a few percent of the row wide).
#
# Every step compares or copies values, so the threshold is the same element as topk's and the
# mask, hence the loss and its gradient, are bit for bit those of the plain topk selection.

_SELECT_BLOCK = 1 << 19  # entries per block of rows (2 MiB of float32)
_SELECT_SAMPLE = 2048  # sampled columns per row
_SELECT_Z = 5.0  # half-width of the bracket in standard deviations of the sampled rank


def _topk_threshold(logits: Tensor, num_hard: int) -> Tensor:
    """The ``num_hard``-th largest entry of each row (with multiplicity), shape (R, 1)."""
    return logits.topk(num_hard, dim=1, sorted=False).values.amin(dim=1, keepdim=True)


def _sampled_bracket(block: Tensor, num_hard: int) -> tuple[Tensor, Tensor] | None:
    """``(lo, hi)``, each (R, 1), likely to bracket the ``num_hard``-th largest of each row.

    None when sampling cannot help (short rows, or a bracket as wide as the sample).
    """
    width = block.shape[1]
    step = width // _SELECT_SAMPLE
    if step < 4:
        return None
    sample = block[:, ::step]
    size = sample.shape[1]
    frac = num_hard / width
    mean = size * frac  # expected number of sampled entries >= the threshold
    spread = _SELECT_Z * math.sqrt(mean * (1.0 - frac)) + 1.0
    rank_lo, rank_hi = math.ceil(mean + spread), math.floor(mean - spread)
    if rank_lo > size // 2:
        return None
    top = sample.topk(rank_lo, dim=1, sorted=False).values
    lo = top.amin(dim=1, keepdim=True)
    if rank_hi < 1:
        return lo, torch.full_like(lo, float("inf"))
    return lo, _topk_threshold(top, rank_hi)


class _Scratch:
    """Buffers for one block of rows, allocated once per call and reused by every block.

    Fresh multi-MiB temporaries would be mapped (and page-faulted) anew on every operation.
    """

    def __init__(self, rows: int, width: int, like: Tensor) -> None:
        self.diff = like.new_empty(rows, width)  # also the counts: exact below 2**24 in float32
        self.above = like.new_empty(rows, width, dtype=torch.bool)
        self.inside = like.new_empty(rows, width, dtype=torch.bool)
        self.inf = like.new_tensor(float("inf"))

    def count_rows(self, mask: Tensor) -> Tensor:
        """Number of True entries of each row of ``mask`` (a block), as int64."""
        if mask.shape[1] >= 2**24 and self.diff.dtype != torch.float64:
            return mask.sum(dim=1)
        return self.diff[: len(mask)].copy_(mask).sum(dim=1).long()


def _block_threshold(block: Tensor, num_hard: int, scratch: _Scratch) -> Tensor:
    """Exactly :func:`_topk_threshold` of ``block``, through a sampled bracket (see above)."""
    bracket = _sampled_bracket(block, num_hard)
    if bracket is None:
        return _topk_threshold(block, num_hard)
    lo, hi = bracket  # lo <= hi: two order statistics of one sample
    n_rows = len(block)
    above = torch.gt(block, hi, out=scratch.above[:n_rows])
    inside = torch.ge(block, lo, out=scratch.inside[:n_rows]).logical_xor_(above)  # lo <= s <= hi
    n_above, n_inside = scratch.count_rows(above), scratch.count_rows(inside)
    rank = num_hard - n_above  # rank of the threshold among the bracketed entries, 1 = largest
    ok = (rank >= 1) & (rank <= n_inside) & ~block.amax(dim=1).isnan()
    thr = torch.empty_like(lo)
    bad = (~ok).nonzero().squeeze(1)
    if len(bad):
        thr[bad] = _topk_threshold(block[bad], num_hard)
    if len(bad) == n_rows:
        return thr
    # Gather each good row's bracketed entries behind (r_max - r) +inf entries, so that the
    # r_max-th largest of the padded row is the r-th largest of its bracket, for every row.
    good = ok.nonzero().squeeze(1).tolist()
    ranks = rank.tolist()
    values = block[inside].split(n_inside.tolist())
    r_max = max(ranks[i] for i in good)
    rows = [
        torch.cat([values[i].new_full((r_max - ranks[i],), float("inf")), values[i]]) for i in good
    ]
    padded = pad_sequence(rows, batch_first=True, padding_value=float("-inf"))
    thr[good] = _topk_threshold(padded, r_max)
    return thr


def _mask_below_(block: Tensor, thr: Tensor, scratch: _Scratch) -> None:
    """``block.masked_fill_(block < thr, -inf)``, with arithmetic instead of a boolean mask.

    For a finite threshold, ``copysign(inf, s - thr)`` is -inf exactly where ``s < thr`` (the
    difference of two floats is negative, or -0 when flushed to zero, iff ``s < thr``) and +inf
    elsewhere (a NaN ``s`` stays NaN through ``minimum``), so the result is the masked fill's,
    several times faster on CPU.
    """
    if not bool(torch.isfinite(thr).all()):
        block.masked_fill_(block < thr, float("-inf"))
        return
    bound = torch.sub(block, thr, out=scratch.diff[: len(block)])
    torch.copysign(scratch.inf, bound, out=bound)
    torch.minimum(block, bound, out=block)


def _hard_mask_(logits: Tensor, num_hard: int, diagonals: Sequence[int]) -> None:
    """Mask, in place, every entry below the ``num_hard``-th largest of its row.

    Equal to ``logits.masked_fill_(logits < topk(logits, num_hard).min(), -inf)`` row by row,
    ties at the threshold kept; see the comment above for how the threshold is found on CPU.
    Elsewhere (GPU) the plain topk is kept: it is fast there, and the CPU path would wait on
    the device at every block.
    """
    for offset in diagonals:
        logits.diagonal(offset).fill_(float("-inf"))
    if logits.device.type != "cpu":
        logits.masked_fill_(logits < _topk_threshold(logits, num_hard), float("-inf"))
        return
    rows = min(len(logits), max(1, _SELECT_BLOCK // max(1, logits.shape[1])))
    scratch = _Scratch(rows, logits.shape[1], logits)
    for start in range(0, len(logits), rows):
        block = logits[start : start + rows]
        _mask_below_(block, _block_threshold(block, num_hard, scratch), scratch)


class _NegativeLogSumExp(torch.autograd.Function):
    """Fused ``(lse, wdot)`` of ``anchors @ normalize(candidates).T`` (see negative_lse)."""

    @staticmethod
    def forward(ctx, anchors, rows, norms, temperature_fn, diagonals, num_hard, target):
        logits = _cosine_logits(anchors, Candidates(rows, norms))
        tau = None
        if temperature_fn is not None:
            tau = _call_temperature(temperature_fn, logits)  # cosine similarities, no grad
        if num_hard is not None:
            _hard_mask_(logits, num_hard, diagonals)  # selected on raw similarity
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
            exp.mul_(_inverse_norms(norms).to(exp.dtype))
        ctx.save_for_backward(anchors, rows, norms)
        ctx.exp, ctx.total, ctx.tau, ctx.target = exp, total, tau, target
        ctx.amp_dtype = _autocast_dtype(anchors.device.type)
        return lse, wdot

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_lse, grad_wdot):
        # G = dL/dlogits; with c_hat = c * inv: dL/da = (G * inv) @ c and
        # P = (G * inv).T @ a = inv * dL/dc_hat, turned into dL/dc in place.
        anchors, rows, norms = ctx.saved_tensors
        row_scale = grad_lse.unsqueeze(1) / ctx.total  # G = exp * row_scale (+ target term)
        if ctx.plain:  # exp already holds exp * inv; row_scale goes to the (N, D) side
            scaled = ctx.exp
        else:
            scaled = ctx.exp * row_scale
            if ctx.target is not None:
                scaled.addcmul_(ctx.target, grad_wdot.unsqueeze(1))
            if ctx.tau is not None:
                scaled.div_(ctx.tau)  # the temperature is a constant for the gradient
            scaled.mul_(_inverse_norms(norms).to(scaled.dtype))
        if ctx.amp_dtype is None:
            scaled = scaled.to(anchors.dtype)  # e.g. float16 inputs without autocast
        grad_anchors = grad_rows = None
        with torch.autocast(
            anchors.device.type,
            dtype=ctx.amp_dtype or torch.bfloat16,
            enabled=ctx.amp_dtype is not None,
        ):
            if ctx.needs_input_grad[0]:
                grad_anchors = scaled @ rows
                if ctx.plain:
                    grad_anchors = grad_anchors * row_scale
            if ctx.needs_input_grad[1]:
                right = anchors * row_scale.to(anchors.dtype) if ctx.plain else anchors
                grad_rows = scaled.T @ right
        if grad_anchors is not None:
            grad_anchors = grad_anchors.to(anchors.dtype)
        if grad_rows is not None:
            grad_rows = _normalize_backward_(grad_rows.to(rows.dtype), rows, norms)
        return grad_anchors, grad_rows, None, None, None, None, None
