"""Barlow Twins (Zbontar et al. 2021): the cross-correlation of the two views' projections,
standardised over the batch, is driven to the identity (:func:`contrastkit.losses.barlow_twins`).

Symmetric: both views through the same encoder; no predictor, no momentum branch, no
stop-gradient.
"""

from __future__ import annotations

from torch import Tensor

from contrastkit.checks import check_non_negative_float, check_positive_float
from contrastkit.distributed import gather_with_grad
from contrastkit.losses import barlow_twins
from contrastkit.methods.base import ContrastiveMethod, StepOutput, cosine_of_pairs
from contrastkit.models.factory import BackboneSpec, HeadSpec
from contrastkit.schedules import ScheduleState

#: The official projector (facebookresearch/barlowtwins ``main.py``, ``--projector
#: 8192-8192-8192``): (Linear without bias, BN, ReLU) x 2, then a Linear without bias.
OFFICIAL_PROJECTOR = HeadSpec(hidden_dim=8192, out_dim=8192, num_layers=3, last_bias=False)


class BarlowTwins(ContrastiveMethod):
    """Barlow Twins (Zbontar et al. 2021).

    Args:
        backbone: backbone description.
        projector: projector description; default: the official one (3 layers of 8192).
        lambd: weight of the off-diagonal term (0.0051, the official code).
        scale_loss: factor of the whole loss (1; solo-learn's CIFAR configs use 0.1).

    Distributed: the projections of every process are gathered with gradient and every
    process computes the loss of the whole batch: the standardisation's statistics and the
    cross-correlation are the global batch's, and DDP's average of the gradients is the
    one-process gradient on that batch. The official code reaches the same statistics and C
    (its loss batch norm becomes a ``SyncBatchNorm``, C is divided by the global batch and
    summed over the processes) but its all-reduce is not seen by autograd, so as we read it
    each process back-propagates only through its own rows and DDP's average makes its
    gradient 1 / (processes) of the one-process gradient.
    """

    default_views = ("strong_alpha", "strong_beta")

    def __init__(self, backbone: BackboneSpec | None = None, projector: HeadSpec | None = None,
                 lambd: float = 0.0051, scale_loss: float = 1.0) -> None:
        check_non_negative_float("lambd", lambd)
        check_positive_float("scale_loss", scale_loss)
        super().__init__(backbone=backbone, projector=projector or OFFICIAL_PROJECTOR)
        self.lambd, self.scale_loss = lambd, scale_loss

    def collapse_loss(self) -> float:
        """A constant embedding standardises to zeros: C = 0 and the loss is ``scale_loss * d``."""
        return self.scale_loss * self.embed_dim

    def objective(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        f1, z1 = self.encode(views[0])
        _, z2 = self.encode(views[1])
        z1, z2 = gather_with_grad(z1), gather_with_grad(z2)
        loss = barlow_twins(z1, z2, lambd=self.lambd, scale_loss=self.scale_loss)
        logs = {"positive_similarity": lambda: cosine_of_pairs(z1, z2).mean()}
        return StepOutput(loss=loss, features=f1.detach(), logs=logs, embedding=z1)
