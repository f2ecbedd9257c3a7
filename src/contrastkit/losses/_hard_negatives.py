"""Selection of each anchor's hardest negatives for the hard contrastive loss (private).

Used only by :func:`contrastkit.losses.hard_contrastive`, through the fused log-sum-exp of
:mod:`._logsumexp`. The loss keeps, per row, the entries >= the row's ``num_hard``-th largest.
An exact ``torch.topk`` over the whole N x M matrix is the slow part (it copies every entry into
a (value, index) pair and runs nth_element on them). Instead, on CPU, rows are processed in
blocks of ~``_SELECT_BLOCK`` entries (kept in cache), and per block:

1. a strided sample of ~``_SELECT_SAMPLE`` columns brackets the threshold: ``lo <= hi`` are two
   order statistics of the sample, ``_SELECT_Z`` standard deviations either side of the rank the
   threshold is expected at;
2. counting ``s > hi`` and ``lo <= s <= hi`` over the row *checks* the bracket exactly: the
   threshold is in it iff count(s > hi) < num_hard <= count(s >= lo). Rows that fail (an
   unlucky sample, ties, NaN) fall back to topk, so the result never depends on the sample;
3. the few entries inside the bracket are gathered and the exact threshold taken among them
   (a topk on a block a few percent of the row wide).

Every step compares or copies values, so the threshold is the same element as topk's and the
mask, hence the loss and its gradient, are bit for bit those of the plain topk selection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

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
    """Exactly :func:`_topk_threshold` of ``block``, through a sampled bracket."""
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


def hard_mask_(logits: Tensor, num_hard: int, diagonals: Sequence[int]) -> None:
    """Mask, in place, every entry below the ``num_hard``-th largest of its row.

    Equal to ``logits.masked_fill_(logits < topk(logits, num_hard).min(), -inf)`` row by row,
    ties at the threshold kept; see the module docstring for how the threshold is found on CPU.
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
