"""Random inputs shared by the self-supervised loss tests."""

from __future__ import annotations

import torch

F64 = torch.float64
SHAPES = [(2, 3, None), (7, 5, None), (6, 4, 11), (16, 8, 33)]  # (N, D, K or in-batch)


def make(n, d, k=None, *, seed=0, dtype=F64, grad=True):
    """Query, key (N, D) and optional negatives (K, D), seeded."""
    g = torch.Generator().manual_seed(seed)
    out = [torch.randn(n, d, generator=g, dtype=dtype) for _ in range(2)]
    out.append(None if k is None else torch.randn(k, d, generator=g, dtype=dtype))
    return [None if t is None else t.requires_grad_(grad) for t in out]


def unit(x):
    """Rows scaled to unit norm."""
    return x / x.norm(dim=-1, keepdim=True)
