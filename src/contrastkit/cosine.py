"""The half-cosine curve behind every cosine schedule of contrastkit.

One formula serves the learning-rate decay of pretraining (:mod:`contrastkit.optim`, Loshchilov
& Hutter 2017, "SGDR", eq. 5 without restart), the EMA momentum of the target branch
(:mod:`contrastkit.models.momentum`, Grill et al. 2020, BYOL section 3.2, as used by Denize et
al. 2023, appendix D.1), the coefficient and temperature schedules (:mod:`contrastkit.schedules`)
and the learning rates of the linear and fine-tuning protocols (:mod:`contrastkit.eval`).

This module imports nothing from contrastkit, so every layer can use it.
"""

from __future__ import annotations

import math

__all__ = ["cosine_anneal"]


def cosine_anneal(start: float, end: float, progress: float) -> float:
    r"""Half a cosine period from ``start`` (``progress`` 0) to ``end`` (``progress`` 1).

    .. math:: v(p) = v_{end} + (v_{start} - v_{end}) \, \tfrac12 \bigl(1 + \cos(\pi p)\bigr)

    Args:
        start: value at ``progress = 0``.
        end: value at ``progress = 1``.
        progress: fraction of the schedule done; callers clamp it to [0, 1].

    Returns:
        The value at ``progress`` (``(start + end) / 2`` at one half).
    """
    return end + (start - end) * 0.5 * (1.0 + math.cos(math.pi * progress))
