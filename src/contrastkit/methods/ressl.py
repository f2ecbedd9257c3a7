"""ReSSL (Zheng et al. 2021): the query's similarity distribution over the queue is trained to
match the weak key's sharper one.

The relational baseline of Denize et al. 2023 (SCE), whose eqs. 4-6 give the loss
(:func:`contrastkit.losses.ressl`).
"""

from __future__ import annotations

from contrastkit.losses import Temperature, resolve_temperature, ressl
from contrastkit.methods.base import loggable
from contrastkit.methods.momentum_contrast import MomentumContrast
from contrastkit.schedules import Schedule


class ReSSL(MomentumContrast):
    """ReSSL (Zheng et al. 2021; Denize et al. 2023, eqs. 4-6): relational target of the weak key.

    Args:
        temperature: online temperature tau, a float or a schedule.
        target_temperature: sharper target temperature tau_m, a float or a schedule.
        **kwargs: :class:`MomentumContrast` arguments.
    """

    default_views = ("strong", "weak")

    def __init__(
        self,
        temperature: Temperature = 0.1,
        target_temperature: float | Schedule = 0.04,
        **kwargs,
    ) -> None:
        super().__init__(temperature=temperature, **kwargs)
        self.target_temperature = self.checked_temperature("target_temperature",
                                                           target_temperature)

    def pair_loss(self, query, key, negatives, state):
        t = self.temperature_at(state, (query, key))
        tm = resolve_temperature(self.target_temperature, state)
        loss = ressl(query, key, negatives, temperature=t, target_temperature=tm)
        return loss, loggable(temperature=t, target_temperature=tm)
