"""What every pretraining method shares: an online encoder, and on request a momentum target
branch and a memory queue.

A method is a small ``nn.Module`` that states only what differs from the others: which loss,
whether it has a target branch and a queue, and which views go where (its ``objective``). The
engine (``contrastkit.train``) hands it a list of augmented views and the labels, and calls
:meth:`ContrastiveMethod.after_optimizer_step` after each optimiser step (EMA update, queue
commit).

Online encoder: ``backbone -> projector [-> predictor]``. Target branch (when ``momentum`` is
set): an EMA copy of ``backbone -> projector`` whose momentum follows the cosine schedule of
SCE appendix D.1 from ``momentum`` to 1.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor, nn

from contrastkit.methods.queue import MemoryQueue
from contrastkit.models.factory import BackboneSpec, HeadSpec, build_backbone, build_head
from contrastkit.models.momentum import MomentumBranch, cosine_momentum
from contrastkit.schedules import AnySchedule, ScheduleState


@dataclass
class StepOutput:
    """What a method's objective returns for one batch.

    Attributes:
        loss: scalar training loss (gradient flows to the online encoder).
        features: detached backbone features of the first view, local to this process
            (for the online linear classifier).
        logs: scalar tensors to log (e.g. the current temperature).
    """

    loss: Tensor
    features: Tensor
    logs: dict[str, Tensor | float] = field(default_factory=dict)


class ContrastiveMethod(nn.Module, ABC):
    """Online encoder plus optional momentum target branch and memory queue.

    Subclasses set the class attributes and implement :meth:`objective`.

    Args:
        backbone: backbone description.
        projector: projector description (SCE Tables 21/24).
        predictor: optional predictor on top of the online projector (SCE Table 24).
        momentum: initial EMA momentum of the target branch (``None``: no target branch).
            Follows ``cosine_momentum`` from this value to 1 over training.
        queue_size: rows of the memory queue of target keys (0: no queue, in-batch
            negatives).
        queue_init: ``random`` (MoCo's L2-normalised Gaussian start, the default) or
            ``empty`` (no negatives until filled; in-batch negatives are used meanwhile).
        temperature_schedule: a schedule (e.g. Kukleva et al.'s cosine or MACL's
            alignment-adaptive temperature) that replaces the method's constant temperature.

    Raises:
        ValueError: for a combination the method does not support, with the reason.
    """

    requires_target: ClassVar[bool] = False
    supports_queue: ClassVar[bool] = False
    supports_multicrop: ClassVar[bool] = False
    needs_labels: ClassVar[bool] = False
    default_views: ClassVar[tuple[str, str]] = ("simclr", "simclr")

    def __init__(
        self,
        backbone: BackboneSpec | None = None,
        projector: HeadSpec | None = None,
        predictor: HeadSpec | None = None,
        momentum: float | None = None,
        queue_size: int = 0,
        queue_init: str = "random",
        temperature_schedule: AnySchedule | None = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        backbone = backbone or BackboneSpec()
        projector = projector or HeadSpec()
        if self.requires_target and momentum is None:
            raise ValueError(f"{name} needs a momentum target branch: set momentum (e.g. 0.99)")
        if momentum is not None and not self.requires_target:
            raise ValueError(
                f"{name} has no momentum target branch: momentum must be null "
                "(MoCo, ReSSL and SCE use one)"
            )
        if momentum is not None and not 0.0 <= momentum <= 1.0:
            raise ValueError(f"momentum must lie in [0, 1], got {momentum}")
        if queue_size < 0:
            raise ValueError(f"queue_size must be >= 0, got {queue_size}")
        if queue_size and not self.supports_queue:
            raise ValueError(
                f"{name} uses in-batch negatives: queue_size must be 0 (a memory queue of "
                "target keys needs a momentum branch: use MoCo, ReSSL or SCE)"
            )
        if queue_init not in ("random", "empty"):
            raise ValueError(f"queue_init must be 'random' or 'empty', got {queue_init!r}")
        self.backbone_spec = backbone
        self.backbone = build_backbone(backbone)
        self.projector = build_head(projector, self.backbone.out_dim)
        self.predictor = build_head(predictor, projector.out_dim) if predictor else None
        if predictor is not None and predictor.out_dim != projector.out_dim:
            raise ValueError(
                f"predictor.out_dim ({predictor.out_dim}) must equal projector.out_dim "
                f"({projector.out_dim}): predictions are compared with target projections"
            )
        self.base_momentum = momentum
        self.target = (
            MomentumBranch(nn.Sequential(self.backbone, self.projector))
            if momentum is not None
            else None
        )
        self.queue = (
            MemoryQueue(queue_size, projector.out_dim, init=queue_init, gather=True)  # type: ignore[arg-type]
            if queue_size
            else None
        )
        self.temperature_schedule = temperature_schedule
        self.embed_dim = projector.out_dim

    # --- encoders -----------------------------------------------------------------------------
    def encode(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Online branch: ``(backbone features, projection [-> prediction])``."""
        features = self.backbone(x)
        z = self.projector(features)
        if self.predictor is not None:
            z = self.predictor(z)
        return features, z

    @torch.no_grad()
    def encode_target(self, x: Tensor) -> Tensor:
        """Target branch projection (no gradient); the online projector if no target."""
        if self.target is None:
            return self.projector(self.backbone(x)).detach()
        return self.target(x)

    # --- what subclasses state ----------------------------------------------------------------
    @abstractmethod
    def objective(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        """The method's loss on one batch of views; see the subclasses."""

    def forward(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        """Check the views, then compute :meth:`objective`."""
        if len(views) < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 views, got {len(views)}")
        if len(views) > 2 and not self.supports_multicrop:
            raise ValueError(
                f"{type(self).__name__} got {len(views)} views: multi-crop needs a momentum "
                "target branch (local crops are queries only); use SCE, MoCo or ReSSL"
            )
        if views[0].shape[0] < 2:
            raise ValueError(
                f"batch of {views[0].shape[0]} per process: contrastive losses need at least 2"
            )
        return self.objective(views, labels, state)

    # --- helpers for subclasses ---------------------------------------------------------------
    def current_temperature(
        self, base: float, state: ScheduleState, positive: Tensor | None = None
    ) -> float | Tensor:
        """``base``, or the temperature schedule's value at ``state`` when one is set.

        ``positive``: detached cosine similarities of the positive pairs, for
        alignment-adaptive schedules (MACL), whose value is then a 0-d tensor on the
        embeddings' device (passed to the loss as is: reading it on the host would make a GPU
        wait).
        """
        if self.temperature_schedule is None:
            return base
        if positive is not None:
            state = ScheduleState(
                step=state.step, total_steps=state.total_steps, epoch=state.epoch,
                total_epochs=state.total_epochs, positive_similarity=positive.detach(),
            )
        value = self.temperature_schedule(state)
        return value if isinstance(value, Tensor) else float(value)

    def queue_negatives(self) -> Tensor | None:
        """Queue rows to use as negatives, or ``None`` (in-batch) without a ready queue."""
        if self.queue is None or not self.queue.is_ready:
            return None
        return self.queue.negatives()

    # --- after the optimiser step -------------------------------------------------------------
    @torch.no_grad()
    def after_optimizer_step(self, state: ScheduleState) -> dict[str, float]:
        """EMA update of the target branch and commit of the keys staged for the queue.

        Called once per optimiser step (after all accumulated micro-batches), so gradient
        accumulation behaves as the equivalent large batch.
        """
        logs: dict[str, float] = {}
        if self.target is not None and self.base_momentum is not None:
            m = cosine_momentum(state.step, state.total_steps, self.base_momentum)
            self.target.update(m)
            logs["momentum"] = m
        if self.queue is not None:
            self.queue.commit()
        return logs


def cosine_of_pairs(a: Tensor, b: Tensor) -> Tensor:
    """Row-wise cosine similarity, detached (for logging and adaptive temperatures)."""
    a = nn.functional.normalize(a.detach().float(), dim=-1)
    b = nn.functional.normalize(b.detach().float(), dim=-1)
    return (a * b).sum(-1)
