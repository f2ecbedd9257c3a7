"""The one rule of numeric precision outside the network: float16 and bfloat16 values (what
autocast gives) are computed on in float32; float32 and wider stay as they are. The losses
(exponentials and sums), the keys a momentum method compares and the memory queue's rows all
follow it.
"""

from __future__ import annotations

import torch
from torch import Tensor

#: The dtypes computed on in float32.
LOW_PRECISION = (torch.float16, torch.bfloat16)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for float16/bfloat16, else ``dtype``."""
    return torch.float32 if dtype in LOW_PRECISION else dtype


def at_least_float32(x: Tensor) -> Tensor:
    """``x`` in float32 if it is float16/bfloat16 (an exact cast), else ``x`` itself."""
    return x.to(compute_dtype(x.dtype))
