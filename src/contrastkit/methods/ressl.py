"""ReSSL (Zheng et al. 2021): the query's similarity distribution over the queue is trained to
match the weak key's sharper one.

The relational baseline of Denize et al. 2023 (SCE), whose eqs. 4-6 give the loss
(:func:`contrastkit.losses.ressl`).
"""

from __future__ import annotations

from contrastkit.losses import ressl
from contrastkit.methods.base import cosine_of_pairs
from contrastkit.methods.momentum_contrast import MomentumContrast


class ReSSL(MomentumContrast):
    """ReSSL (Zheng et al. 2021; Denize et al. 2023, eqs. 4-6): relational target of the weak key.

    Args:
        temperature: online temperature tau.
        target_temperature: sharper target temperature tau_m.
        **kwargs: :class:`MomentumContrast` arguments.
    """

    default_views = ("strong", "weak")

    def __init__(
        self, temperature: float = 0.1, target_temperature: float = 0.04, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self.temperature = temperature
        self.target_temperature = target_temperature

    def pair_loss(self, query, key, negatives, state):
        t = self.current_temperature(self.temperature, state, cosine_of_pairs(query, key))
        loss = ressl(query, key, negatives, temperature=t,
                     target_temperature=self.target_temperature)
        return loss, {"temperature": t}
