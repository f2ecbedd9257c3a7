"""BYOL (Grill et al. 2020): the online prediction of each view regresses the EMA target's
projection of the other view (:func:`contrastkit.losses.byol`), without negatives.

Distributed: the loss has no term across samples, so each process computes its own batch's
mean and DDP averages the gradients, which equals one process on the combined batch, as the
official code does (deepmind-research ``byol/byol_experiment.py``: per-device loss, gradients
averaged with ``pmean``; its batch norm is synchronised across devices: set
``trainer.sync_batchnorm``).
"""

from __future__ import annotations

from typing import Literal

from torch import Tensor

from contrastkit.losses import byol
from contrastkit.methods.base import ContrastiveMethod, StepOutput, cosine_of_pairs
from contrastkit.models.factory import BackboneSpec, HeadSpec
from contrastkit.schedules import ScheduleState


class BYOL(ContrastiveMethod):
    """BYOL: online backbone, projector and predictor; EMA target of backbone and projector.

    Loss ``byol(p1, z2') + byol(p2, z1')`` (eq. 3 of Grill et al.: the sum of the two
    directions, as the official code; lightly's benchmark averages them with a negative cosine,
    a quarter of this loss's gradient). The target's momentum follows the cosine schedule from
    ``momentum`` to 1 (Grill et al. section 3.2) or stays constant (lightly's CIFAR-10
    benchmark, 0.99). The target starts as a copy of the online branch (the official code
    initialises it with its own random draw; it reports no difference).

    Args:
        backbone: backbone description.
        projector: projector (default BYOL's: 2 layers, BN after the hidden one, 4096 hid,
            256 out).
        predictor: predictor (default: the projector's form and sizes; its output size must
            be the projector's).
        momentum: initial EMA momentum (BYOL's tau_base, 0.996 in the paper).
        momentum_schedule: ``cosine`` (to 1 over training) or ``constant``.
    """

    requires_target = True
    default_views = ("strong_alpha", "strong_beta")

    def __init__(
        self,
        backbone: BackboneSpec | None = None,
        projector: HeadSpec | None = None,
        predictor: HeadSpec | None = None,
        momentum: float = 0.996,
        momentum_schedule: Literal["cosine", "constant"] = "cosine",
    ) -> None:
        projector = projector or HeadSpec(4096, 256)
        predictor = predictor or HeadSpec(projector.hidden_dim, projector.out_dim)
        super().__init__(backbone=backbone, projector=projector, predictor=predictor,
                         momentum=momentum, momentum_schedule=momentum_schedule)

    def objective(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        f1, p1 = self.encode(views[0])
        _, p2 = self.encode(views[1])
        z1, z2 = self.encode_target(views[0]), self.encode_target(views[1])
        loss = byol(p1, z2) + byol(p2, z1)
        logs = {"positive_similarity": lambda: cosine_of_pairs(p1, z2).mean()}
        return StepOutput(loss=loss, features=f1.detach(), logs=logs, embedding=p1)
