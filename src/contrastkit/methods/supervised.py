"""Supervised contrastive pretraining: SupCon, SINCERE and epsilon-SupInfoNCE on two views.

Feeney & Hughes 2023 (SINCERE, eqs. 3, 12, 15). Each image gives two views through the online
encoder; the projections (B, 2, D) of the whole multi-process batch, gathered with gradient,
and their labels form the loss.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from contrastkit.distributed import gather_no_grad, gather_with_grad
from contrastkit.hot_path import in_hot_path
from contrastkit.losses import Temperature, eps_supinfonce, sincere, supcon
from contrastkit.methods.base import ContrastiveMethod, StepOutput, cosine_of_pairs, loggable
from contrastkit.schedules import ScheduleState


class SupervisedContrastive(ContrastiveMethod):
    """Supervised contrastive learning with a choice of loss.

    Args:
        loss: ``sincere`` (default), ``supcon`` or ``eps_supinfonce``.
        temperature: loss temperature, a float or a schedule (the supervised losses take one
            temperature for every pair).
        epsilon: margin of epsilon-SupInfoNCE.
        **kwargs: :class:`ContrastiveMethod` arguments (no momentum, no queue).

    Raises:
        ValueError: at run time if a batch has unlabelled samples (label < 0).
    """

    needs_labels = True
    default_views = ("simclr", "simclr")

    def __init__(
        self,
        loss: Literal["sincere", "supcon", "eps_supinfonce"] = "sincere",
        temperature: Temperature = 0.1,
        epsilon: float = 0.25,
        **kwargs,
    ) -> None:
        super().__init__(temperature=temperature, **kwargs)
        if loss not in ("sincere", "supcon", "eps_supinfonce"):
            raise ValueError(f"loss must be sincere, supcon or eps_supinfonce, got {loss!r}")
        self.loss_name = loss
        self.epsilon = epsilon

    def objective(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        # In the training step the engine checks the split's labels once, before training.
        if not in_hot_path() and bool((labels < 0).any()):
            raise ValueError(
                "supervised contrastive pretraining got unlabelled samples (label -1): "
                "use a labelled split"
            )
        f1, z1 = self.encode(views[0])
        _, z2 = self.encode(views[1])
        z = gather_with_grad(torch.stack([z1, z2], dim=1))
        y = gather_no_grad(labels)
        t = self.temperature_at(state, (z[:, 0], z[:, 1]))
        if self.loss_name == "sincere":
            loss = sincere(z, y, temperature=t)
        elif self.loss_name == "supcon":
            loss = supcon(z, y, temperature=t)
        else:
            loss = eps_supinfonce(z, y, temperature=t, epsilon=self.epsilon)
        logs = {**loggable(temperature=t),
                "positive_similarity": lambda: cosine_of_pairs(z[:, 0], z[:, 1]).mean()}
        return StepOutput(loss=loss, features=f1.detach(), logs=logs, embedding=z1)
