"""What tests read of a :class:`~contrastkit.methods.queue.MemoryQueue` beyond its interface."""

from __future__ import annotations

import torch
from torch import Tensor

from contrastkit.methods.queue import MemoryQueue


def ordered(queue: MemoryQueue) -> Tensor:
    """Valid keys from oldest to newest, shape ``(num_valid, dim)``."""
    n, p = queue.num_valid, int(queue.ptr)
    if n < queue.size:
        return queue.keys[:n].clone()
    return torch.cat([queue.keys[p:], queue.keys[:p]], dim=0)


def staged_rows(queue: MemoryQueue) -> int:
    """Rows staged and not yet committed."""
    return sum(k.shape[0] for k in queue._staged)


def is_full(queue: MemoryQueue) -> bool:
    """True once ``size`` keys have been written (warm-up over)."""
    return queue.num_valid == queue.size
