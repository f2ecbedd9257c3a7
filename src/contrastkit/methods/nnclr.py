"""NNCLR (Dwibedi et al. 2021): InfoNCE between the nearest neighbour of each view's projection in
a support set of past projections and the predictions of the other view.

What differs from SimCLR: the encoder keeps both the projection z (for the neighbour lookup and
the support set) and the prediction p (for the loss); the support set is the memory queue
(``queue_size``, L2-normalised rows, random at the start as solo-learn's and lightly's), read
before and written after the optimiser step with the first view's projections of the whole
batch (gathered from every process, as solo-learn; lightly keeps one per process by default).
Each process finds the neighbours of its own rows; neighbours and predictions are then gathered
(the predictions with gradient) and every process computes the loss of the global batch, as
:class:`~contrastkit.methods.SimCLR` does. With ``queue_init: empty`` the neighbour of a
projection is the projection itself until the first rows are written.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from contrastkit.distributed import gather_no_grad, gather_with_grad
from contrastkit.losses import Temperature, nearest_neighbours, nnclr
from contrastkit.methods.base import ContrastiveMethod, StepOutput, cosine_of_pairs, loggable
from contrastkit.schedules import ScheduleState


class NNCLR(ContrastiveMethod):
    """NNCLR (Dwibedi et al. 2021; solo-learn ``solo/methods/nnclr.py``, lightly ``NNCLRModel``).

    Args:
        temperature: tau (0.1 in the paper; 0.2 in solo-learn's CIFAR recipe), a float or a
            schedule.
        queue_size: rows of the support set (98,304 in the paper, 65,536 in solo-learn, 4,096
            in lightly's CIFAR-10 benchmark).
        form: ``info_nce`` (the paper's and solo-learn's loss) or ``nt_xent`` (lightly's:
            :func:`~contrastkit.losses.nnclr`).
        **kwargs: :class:`~contrastkit.methods.base.ContrastiveMethod` arguments (projector:
            3 layers ending in BN in the paper, predictor); no momentum. Without a predictor
            the prediction is the projection.
    """

    supports_queue = True

    def __init__(self, temperature: Temperature = 0.1, queue_size: int = 65536,
                 form: Literal["info_nce", "nt_xent"] = "info_nce", **kwargs) -> None:
        if queue_size < 1:
            raise ValueError(f"NNCLR needs a support set: queue_size must be >= 1, got "
                             f"{queue_size}")
        super().__init__(temperature=temperature, queue_size=queue_size, **kwargs)
        if form not in ("info_nce", "nt_xent"):
            raise ValueError(f"form must be 'info_nce' or 'nt_xent', got {form!r}")
        self.form = form

    def encode_both(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(backbone features, projection z, prediction p)`` of the online branch."""
        with self.online_casts.applied(x):
            features = self.backbone(x)
            z = self.projector(features)
            p = self.predictor(z) if self.predictor is not None else z
        return features, z, p

    def objective(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        f1, z1, p1 = self.encode_both(views[0])
        _, z2, p2 = self.encode_both(views[1])
        support = self.queue_negatives()
        nn1, nn2 = ((nearest_neighbours(z, support) if support is not None else z.detach())
                    for z in (z1, z2))
        dtype = torch.promote_types(p1.dtype, torch.float32)  # float32 under autocast
        nn1, nn2 = (gather_no_grad(n).to(dtype) for n in (nn1, nn2))
        p1, p2 = (gather_with_grad(p).to(dtype) for p in (p1, p2))
        t = self.temperature_at(state)
        loss = nnclr(nn1, nn2, p1, p2, temperature=t, form=self.form)
        self.queue.stage(z1)
        logs = {**loggable(temperature=t),
                "positive_similarity": lambda: cosine_of_pairs(nn1, p2).mean()}
        return StepOutput(loss=loss, features=f1.detach(), logs=logs, embedding=z1)
