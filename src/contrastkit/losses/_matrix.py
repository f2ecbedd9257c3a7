"""The off-diagonal entries of a square matrix, as a view (private; Barlow Twins, VICReg)."""

from __future__ import annotations

from torch import Tensor


def off_diagonal(c: Tensor) -> Tensor:
    """The d(d-1) off-diagonal entries of a square (d, d) matrix, as a (d - 1, d) view.

    In the row-major layout each diagonal entry is followed by d off-diagonal ones: dropping
    the last entry and reading the rest as rows of d + 1 puts every diagonal entry first in its
    row. No (d, d) mask and no subtraction of the diagonal's squares from the total (which
    would lose the small off-diagonal sum next to a diagonal of ones in float32).
    """
    d = c.shape[0]
    return c.flatten()[:-1].view(d - 1, d + 1)[:, 1:]
