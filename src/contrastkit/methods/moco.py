"""MoCo v2 (Chen et al. 2020): InfoNCE of each query against its key and the memory queue.

The baseline of Denize et al. 2023 (SCE, Table 6); the loss is their eq. 3
(:func:`contrastkit.losses.info_nce`).
"""

from __future__ import annotations

from contrastkit.losses import Temperature, info_nce
from contrastkit.methods.base import loggable
from contrastkit.methods.momentum_contrast import MomentumContrast


class MoCo(MomentumContrast):
    """MoCo v2 (Chen et al. 2020): InfoNCE of the query against its key and the queue.

    Args:
        temperature: InfoNCE temperature (0.2 in MoCo v2 and in SCE's CIFAR baseline): a
            float, a schedule, or a per-pair temperature (InfoNCE divides each pair by its own;
            see :class:`~contrastkit.methods.base.ContrastiveMethod`).
        **kwargs: :class:`MomentumContrast` arguments.
    """

    default_views = ("strong", "strong")
    per_pair_temperature = True

    def __init__(self, temperature: Temperature = 0.2, **kwargs) -> None:
        super().__init__(temperature=temperature, **kwargs)

    def pair_loss(self, query, key, negatives, state):
        t = self.temperature_at(state, (query, key))
        return info_nce(query, key, negatives, temperature=t), loggable(temperature=t)
