"""SCE, Similarity Contrastive Estimation (Denize et al. 2023).

The one-hot target of InfoNCE mixed with the key's similarity distribution over the memory queue
(eqs. 8-10, :func:`contrastkit.losses.sce`); optionally the three terms of Proposition 1
weighted freely (eq. 11, Table 3).
"""

from __future__ import annotations

from contrastkit.losses import Temperature, resolve_temperature, sce, sce_terms
from contrastkit.losses.sce import POSITIVE_TARGETS
from contrastkit.methods.base import loggable
from contrastkit.methods.momentum_contrast import MomentumContrast
from contrastkit.schedules import Schedule


class SCE(MomentumContrast):
    """Similarity Contrastive Estimation (Denize et al. 2023, eqs. 8-10).

    Target ``w = coeff * one_hot + (1 - coeff) * s2`` (s2: the key's sharpened similarity
    distribution over the negatives) against the query's softmax over positive + negatives.

    Args:
        coeff: lambda, the weight of the one-hot term.
        temperature: online temperature tau, a float or a schedule.
        target_temperature: target temperature tau_m, a float or a schedule (e.g. a warm-up).
        coeff_schedule: optional schedule of lambda (the paper's open improvement).
        free_coefficients: ``(lambda, mu, eta)`` weighting the three terms of Proposition 1
            (``lambda * InfoNCE + mu * ReSSL + eta * Ceil``, SCE Table 3) instead of ``sce``.
        positive_target: ``masked`` (eq. 5, the default) or ``zero_logit`` (the authors'
            eztorch code: the positive keeps a zero logit in the key's target softmax), see
            :data:`contrastkit.losses.sce.POSITIVE_TARGETS`; not with ``free_coefficients``
            (Proposition 1's terms are eq. 5's).
        **kwargs: :class:`MomentumContrast` arguments.
    """

    default_views = ("strong", "weak")

    def __init__(
        self,
        coeff: float = 0.5,
        temperature: Temperature = 0.1,
        target_temperature: float | Schedule = 0.07,
        coeff_schedule: Schedule | None = None,
        free_coefficients: tuple[float, float, float] | None = None,
        positive_target: str = "masked",
        **kwargs,
    ) -> None:
        super().__init__(temperature=temperature, **kwargs)
        if not 0.0 <= coeff <= 1.0:
            raise ValueError(f"coeff must lie in [0, 1], got {coeff}")
        if positive_target not in POSITIVE_TARGETS:
            raise ValueError(f"positive_target must be one of {', '.join(POSITIVE_TARGETS)}, "
                             f"got {positive_target!r}")
        if positive_target != "masked" and free_coefficients is not None:
            raise ValueError("positive_target 'zero_logit' does not apply with "
                             "free_coefficients (Proposition 1's terms use eq. 5's target)")
        self.positive_target = positive_target
        self.coeff = coeff
        self.target_temperature = self.checked_temperature("target_temperature",
                                                           target_temperature)
        self.coeff_schedule = coeff_schedule
        self.free_coefficients = free_coefficients

    def pair_loss(self, query, key, negatives, state):
        t = self.temperature_at(state, (query, key))
        tm = resolve_temperature(self.target_temperature, state)
        coeff = float(self.coeff_schedule(state)) if self.coeff_schedule else self.coeff
        logs = loggable(temperature=t, target_temperature=tm, coeff=coeff)
        if self.free_coefficients is None:
            return sce(query, key, negatives, temperature=t, target_temperature=tm,
                       coeff=coeff, positive_target=self.positive_target), logs
        lam, mu, eta = self.free_coefficients
        terms = sce_terms(query, key, negatives, temperature=t, target_temperature=tm)
        loss = lam * terms["info_nce"] + mu * terms["ressl"] + eta * terms["ceil"]
        return loss, logs
