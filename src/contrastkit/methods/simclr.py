"""SimCLR and its in-batch variants: NT-Xent, DCL, DCLW, the hard contrastive loss, DySTreSS.

SimCLR (Chen et al. 2020): both views go through the same online encoder; every view is an
anchor whose positive is its other view and whose negatives are the other 2N-2 views of the
whole (multi-process) batch. DySTreSS (Manna et al. 2023, Alg. 3) keeps this and only changes
the temperature into a function of each pair's cosine similarity: ``temperature`` set to a
:class:`~contrastkit.losses.DySTreSSTemperature`.
"""

from __future__ import annotations

from typing import Literal

from torch import Tensor

from contrastkit.distributed import gather_with_grad
from contrastkit.losses import Temperature, dcl, dclw, hard_contrastive, info_nce, nt_xent
from contrastkit.methods.base import ContrastiveMethod, StepOutput, cosine_of_pairs, loggable
from contrastkit.schedules import ScheduleState

_LOSSES = ("nt_xent", "dcl", "dclw", "hard_contrastive", "info_nce")


class SimCLR(ContrastiveMethod):
    """In-batch contrastive learning with a choice of loss.

    Args:
        loss: ``nt_xent`` (SimCLR: 2N-2 negatives per anchor), ``dcl`` (decoupled: positive
            removed from the denominator), ``dclw`` (DCL with the von Mises-Fisher weight on
            the positive, Yeh et al. 2022; weights over the global batch), ``info_nce``
            (each view against the other view's N keys, N-1 negatives, symmetrised) or
            ``hard_contrastive`` (Wang & Liu: the same candidates as ``info_nce`` but only the
            ``num_hard`` most similar negatives; symmetrised). Compare ``hard_contrastive``
            with ``info_nce``: identical candidate sets, only the hard-negative selection
            differs.
        temperature: a float; a function of the cosine similarity returning a temperature per
            pair, e.g. :class:`~contrastkit.losses.DySTreSSTemperature` (DySTreSS Alg. 1), or a
            :class:`~contrastkit.losses.PairTemperature`; or a schedule such as
            :class:`~contrastkit.losses.KuklevaCosineTemperature` or
            :class:`~contrastkit.losses.MACLTemperature` (see
            :class:`~contrastkit.methods.base.ContrastiveMethod`).
        num_hard: negatives kept by ``hard_contrastive``.
        sigma: sigma of the ``dclw`` weight (lightly's default 0.5).
        **kwargs: :class:`~contrastkit.methods.base.ContrastiveMethod` arguments (backbone,
            projector, predictor); no momentum and no queue.

    Distributed: the projections are gathered with gradient from every process and each
    process computes the loss of the whole global batch, so the gradient equals the
    single-process one on the combined batch (``gather_with_grad`` sums the slices'
    gradients, DDP averages them).
    """

    default_views = ("simclr", "simclr")
    per_pair_temperature = True

    def __init__(
        self,
        loss: Literal["nt_xent", "dcl", "dclw", "hard_contrastive", "info_nce"] = "nt_xent",
        temperature: Temperature = 0.5,
        num_hard: int = 4096,
        sigma: float = 0.5,
        **kwargs,
    ) -> None:
        super().__init__(temperature=temperature, **kwargs)
        if loss not in _LOSSES:
            raise ValueError(f"loss must be one of {_LOSSES}, got {loss!r}")
        self.loss_name = loss
        self.num_hard = num_hard
        self.sigma = sigma

    def objective(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        f1, z1 = self.encode(views[0])
        _, z2 = self.encode(views[1])
        z1, z2 = gather_with_grad(z1), gather_with_grad(z2)
        t = self.temperature_at(state, (z1, z2))
        if self.loss_name == "nt_xent":
            loss = nt_xent(z1, z2, temperature=t)
        elif self.loss_name == "dcl":
            loss = dcl(z1, z2, temperature=t)
        elif self.loss_name == "dclw":
            loss = dclw(z1, z2, temperature=t, sigma=self.sigma)
        elif self.loss_name == "info_nce":
            loss = 0.5 * (info_nce(z1, z2, temperature=t) + info_nce(z2, z1, temperature=t))
        else:
            loss = 0.5 * (
                hard_contrastive(z1, z2, temperature=t, num_hard=self.num_hard)
                + hard_contrastive(z2, z1, temperature=t, num_hard=self.num_hard)
            )
        logs = {**loggable(temperature=t),
                "positive_similarity": lambda: cosine_of_pairs(z1, z2).mean()}
        return StepOutput(loss=loss, features=f1.detach(), logs=logs, embedding=z1)
