"""Collective helpers for multi-process contrastive training.

Every function is the identity (or returns the single-process answer) when
``torch.distributed`` is unavailable, not initialised, or has a world size of 1, so methods
call them unconditionally.

Gradient convention of :func:`gather_with_grad`
-----------------------------------------------
Let ``W`` processes each hold ``b_r`` samples of a combined batch of ``N = sum_r b_r``. Rank
``r`` computes ``L_r``, the mean of its *own anchors'* losses against the gathered bank
``Z = cat_r z_r``, and DistributedDataParallel (DDP) averages parameter gradients:
``g_theta = (1/W) sum_r dL_r/dtheta`` where each rank only back-propagates through its own
``z_r``. For that average to equal the gradient of ``L = (1/W) sum_r L_r`` (with equal local
batches this *is* the single-process mean loss over the combined batch), rank ``r`` must
receive ``dL/dz_r * W = sum_{r'} dL_{r'}/dz_r``: the gradient of its own slice **summed** over
all processes. Hence the backward pass is ``all_reduce(SUM)`` of the full gathered gradient,
followed by slicing rank ``r``'s rows. With unequal local batches DDP's plain average weights
ranks equally, so the result is the mean of per-rank mean losses, not the mean over all
``N`` anchors; keep local batches equal (``drop_last=True``) for exact single-process
equivalence.

Unequal batch sizes across ranks are supported by :func:`gather_with_grad` and
:func:`gather_no_grad`: dim-0 sizes are exchanged first (one small extra collective, read back
on the host) and the tensors are padded to the largest size for ``all_gather``, then trimmed.
Inside the training step (:func:`contrastkit.hot_path.hot_path`) equal sizes are trusted and
the exchange is skipped. All other
dimensions and the dtype must agree across ranks (checked; a mismatch raises ``ValueError``
on every rank).

Every function here is a collective when distributed: all ranks must call it, in the same
order, and (for :func:`gather_with_grad`) all ranks must also run the backward pass.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from contrastkit.hot_path import in_hot_path

__all__ = [
    "broadcast_from_rank0",
    "gather_no_grad",
    "gather_no_grad_with_sizes",
    "gather_with_grad",
    "is_distributed",
    "max_over_processes",
    "rank",
    "world_size",
]


def is_distributed() -> bool:
    """Return True when ``torch.distributed`` is available, initialised and ``world_size > 1``."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    """Number of processes in the default group (1 when not distributed)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


def rank() -> int:
    """Rank of this process in the default group (0 when not distributed)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return 0


def _exchange_sizes(tensor: Tensor) -> list[int]:
    """All-gather every rank's shape; return the dim-0 sizes after checking other dims agree."""
    world = dist.get_world_size()
    # Fixed-length header so ranks with a different number of dimensions do not hang:
    # [ndim, dtype id, shape padded with -1 to 8 entries].
    if tensor.dim() > 8:
        raise ValueError(f"tensor must have at most 8 dimensions, got {tensor.dim()}")
    header = torch.full((10,), -1, dtype=torch.long, device=tensor.device)
    header[0] = tensor.dim()
    header[1] = _DTYPE_IDS.get(tensor.dtype, -2)
    if tensor.dim() > 0:
        header[2 : 2 + tensor.dim()] = torch.tensor(tensor.shape, dtype=torch.long)
    headers = [torch.empty_like(header) for _ in range(world)]
    dist.all_gather(headers, header)
    rows = [h.tolist() for h in headers]
    mine = rows[dist.get_rank()]
    for r, row in enumerate(rows):
        if row[0] != mine[0] or row[1] != mine[1] or row[3:] != mine[3:]:
            raise ValueError(
                "tensor must have the same dtype and the same shape except for dim 0 on every "
                f"rank; rank {dist.get_rank()} has {_describe(mine)}, rank {r} has "
                f"{_describe(row)}"
            )
    if tensor.dim() == 0:
        raise ValueError("tensor must have at least 1 dimension to be gathered along dim 0")
    return [row[2] for row in rows]


_DTYPE_IDS = {
    dt: i
    for i, dt in enumerate(
        [
            torch.float32,
            torch.float64,
            torch.float16,
            torch.bfloat16,
            torch.int64,
            torch.int32,
            torch.int16,
            torch.int8,
            torch.uint8,
            torch.bool,
        ]
    )
}


def _describe(row: list[int]) -> str:
    ndim = row[0]
    return f"shape {tuple(row[2 : 2 + ndim])} (dtype id {row[1]})"


def _all_gather_variable(tensor: Tensor) -> tuple[Tensor, list[int]]:
    """Concatenate every rank's ``tensor`` along dim 0 in rank order (sizes may differ).

    Inside :func:`contrastkit.hot_path.hot_path` (the training step) every rank is trusted to
    hold the same shape, as the engine's samplers guarantee, and the size exchange, whose
    result must be read on the host, is skipped.
    """
    if in_hot_path():
        sizes = [tensor.shape[0]] * dist.get_world_size()
        return _all_gather_equal(tensor, len(sizes)), sizes
    sizes = _exchange_sizes(tensor)
    largest = max(sizes)
    tensor = tensor.contiguous()
    if tensor.shape[0] < largest:
        pad = tensor.new_zeros((largest - tensor.shape[0], *tensor.shape[1:]))
        padded = torch.cat([tensor, pad], dim=0)
    else:
        padded = tensor
    buckets = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(buckets, padded)
    gathered = torch.cat([b[:n] for b, n in zip(buckets, sizes, strict=True)], dim=0)
    return gathered, sizes


def _all_gather_equal(tensor: Tensor, processes: int) -> Tensor:
    """Every rank's ``tensor`` (equal shapes) concatenated along dim 0, written once into one
    output (no per-rank buffers to concatenate); a channels_last image batch stays
    channels_last (each rank's rows are whole samples in either layout)."""
    layout = torch.contiguous_format
    if tensor.dim() == 4 and not tensor.is_contiguous() and tensor.is_contiguous(
            memory_format=torch.channels_last):
        layout = torch.channels_last
    tensor = tensor.contiguous(memory_format=layout)
    out = torch.empty((processes * tensor.shape[0], *tensor.shape[1:]), dtype=tensor.dtype,
                      device=tensor.device, memory_format=layout)
    # all_gather_single is the name of torch >= 2.13; all_gather_into_tensor before
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(out, tensor)
    return out


class _GatherWithGrad(torch.autograd.Function):
    """Forward: all_gather along dim 0. Backward: all_reduce(SUM), then this rank's slice."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, tensor: Tensor) -> Tensor:
        gathered, sizes = _all_gather_variable(tensor)
        start = sum(sizes[: dist.get_rank()])
        ctx.slice_ = (start, start + sizes[dist.get_rank()])  # type: ignore[attr-defined]
        return gathered

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: Tensor) -> Tensor:
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        start, stop = ctx.slice_  # type: ignore[attr-defined]
        return grad[start:stop]


def gather_with_grad(tensor: Tensor) -> Tensor:
    """All-gather ``tensor`` along dim 0, keeping the autograd graph.

    Forward: ``out = cat([t_0, t_1, ..., t_{W-1}], dim=0)`` (rank order). Backward: rank ``r``
    receives ``sum_{r'} (dL_{r'}/d out)[rows of r]``: the gradient of its own slice summed over
    all processes (see the module docstring for why this makes DDP's gradient average equal
    the single-process gradient on the combined batch).

    Args:
        tensor: local tensor of shape ``(b_r, ...)``; ``b_r`` may differ between ranks, every
            other dimension and the dtype must agree.

    Returns:
        The gathered tensor of shape ``(sum_r b_r, ...)``; ``tensor`` itself when not
        distributed.

    Raises:
        ValueError: if shapes (beyond dim 0) or dtypes differ across ranks, or ``tensor`` is
            0-dimensional.
    """
    if not is_distributed():
        return tensor
    return _GatherWithGrad.apply(tensor)


@torch.no_grad()
def gather_no_grad(tensor: Tensor) -> Tensor:
    """All-gather ``tensor`` along dim 0 in rank order, without gradient (e.g. queue keys).

    Args:
        tensor: local tensor of shape ``(b_r, ...)``; sizes along dim 0 may differ.

    Returns:
        Detached concatenation of shape ``(sum_r b_r, ...)``; ``tensor.detach()`` when not
        distributed.
    """
    if not is_distributed():
        return tensor.detach()
    gathered, _ = _all_gather_variable(tensor.detach())
    return gathered


@torch.no_grad()
def gather_no_grad_with_sizes(tensor: Tensor) -> tuple[Tensor, list[int]]:
    """:func:`gather_no_grad` plus every rank's dim-0 size, in rank order.

    Every rank receives the same sizes, so a check on them (e.g. "all sizes equal") gives the
    same answer on every rank and cannot leave some ranks waiting in a later collective.

    Returns:
        ``(gathered, sizes)``; ``(tensor.detach(), [len(tensor)])`` when not distributed.
    """
    if not is_distributed():
        return tensor.detach(), [tensor.shape[0]]
    return _all_gather_variable(tensor.detach())


@torch.no_grad()
def broadcast_from_rank0(tensor: Tensor) -> Tensor:
    """Rank 0's value of ``tensor`` on every rank (a new tensor; the input is not modified).

    Args:
        tensor: same shape and dtype on every rank, on the device the backend needs (CUDA for
            NCCL).

    Returns:
        A copy of rank 0's tensor; a copy of ``tensor`` when not distributed.
    """
    out = tensor.detach().clone()
    if is_distributed():
        dist.broadcast(out, src=0)
    return out


@torch.no_grad()
def max_over_processes(value: int, device: torch.device | str = "cpu") -> int:
    """The largest of every process's ``value``: ``max_r value_r``, the same on every process
    (a decision all processes take together, such as whether to stop after this step).

    Args:
        value: this process's integer.
        device: where the one-element tensor lives (CUDA for NCCL).

    Returns:
        The maximum over the processes; ``value`` itself when not distributed.
    """
    if not is_distributed():
        return int(value)
    flag = torch.tensor([int(value)], dtype=torch.long, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return int(flag.item())
