"""SwAV (Caron et al. 2020): each global crop's codes, from Sinkhorn-Knopp over the prototype
scores of the whole batch, are predicted from the scores of every other crop.

What differs from the other methods: the L2-normalised projections are scored against
prototypes (a bias-free linear layer put back on the unit sphere after every step, frozen for
the first steps, ``prototypes`` in :attr:`gradient_freezes`); the codes of the two global crops
come from :func:`~contrastkit.losses.sinkhorn_knopp` over the global batch (every process
gathers the projections, as the official code all-reduces the sums) and, once a feature queue
per global crop is full, its rows; local crops (multi-crop) only predict. No target branch.
Collapse shows as a loss stuck at log K (8.0 for 3,000 prototypes); the cosine of the two
global crops' projections is logged as ``train/positive_similarity``, as the other methods'
positive pairs. Not for ``model.performance.step: captured`` (the queues and the prototypes'
normalisation are updated after the step).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastkit.distributed import gather_no_grad, rank
from contrastkit.gradients import GradientFreeze
from contrastkit.losses import Temperature, sinkhorn_knopp, swav
from contrastkit.losses._normalize import autocast_off
from contrastkit.methods.base import ContrastiveMethod, StepOutput, cosine_of_pairs, loggable
from contrastkit.methods.queue import MemoryQueue
from contrastkit.models.prototypes import normalize_prototypes_
from contrastkit.precision import at_least_float32
from contrastkit.schedules import ScheduleState

#: ``main_swav.py``'s default ``--freeze_prototypes_niters``.
OFFICIAL_FREEZE = GradientFreeze(until=313, unit="step")


class SwAV(ContrastiveMethod):
    """SwAV (Caron et al. 2020; facebookresearch/swav ``main_swav.py``).

    Args:
        num_prototypes: K (3,000 in SwAV).
        temperature: tau of the prediction softmax (0.1), a float or a schedule.
        sinkhorn_epsilon: entropy weight epsilon of Sinkhorn-Knopp (0.05).
        sinkhorn_iterations: Sinkhorn-Knopp iterations (3).
        queue_size: rows of the feature queue of each global crop (0: none; 3,840 in the
            batch-256 recipe and solo-learn's CIFAR one). Its rows join the codes' Sinkhorn
            once the queue is full, as the official code's.
        queue_start_epoch: epoch from which projections enter the queues (15 official, 50 in
            solo-learn's CIFAR recipe).
        freeze_prototypes: how long the prototypes stay fixed (313 steps by default; 5,005 in
            the batch-256 recipe; solo-learn: epochs).
        **kwargs: :class:`~contrastkit.methods.base.ContrastiveMethod` arguments (backbone,
            projector: 128-d output in SwAV); no momentum, no predictor.

    Known differences from other codes (``docs/methods.md``): solo-learn weight-normalises the
    prototypes (gradient through the normalisation) and keeps zero rows of a queue not yet
    filled; lightly's prototypes have a bias; the official code forwards crops of one size as
    one batch (one set of batch-norm statistics), contrastkit each view on its own; the
    official code trims the queue to a multiple of the global batch, contrastkit keeps it.
    """

    supports_multicrop = True
    supports_queue = True  # its own feature queues (queue_size), not the base's key queue
    captured_step = False

    def __init__(
        self,
        num_prototypes: int = 3000,
        temperature: Temperature = 0.1,
        sinkhorn_epsilon: float = 0.05,
        sinkhorn_iterations: int = 3,
        queue_size: int = 0,
        queue_start_epoch: float = 15,
        freeze_prototypes: GradientFreeze = OFFICIAL_FREEZE,
        **kwargs,
    ) -> None:
        super().__init__(temperature=temperature, **kwargs)
        if queue_size < 0:
            raise ValueError(f"queue_size must be >= 0, got {queue_size}")
        self.prototypes = nn.Linear(self.embed_dim, num_prototypes, bias=False)
        normalize_prototypes_(self.prototypes)
        self.sinkhorn_epsilon, self.sinkhorn_iterations = sinkhorn_epsilon, sinkhorn_iterations
        self.queue_start_epoch = queue_start_epoch
        self.queues = nn.ModuleList(MemoryQueue(queue_size, self.embed_dim)  # rows: gathered
                                    for _ in range(2)) if queue_size else None
        self.gradient_freezes["prototypes"] = freeze_prototypes

    def objective(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        encoded = [self.encode(v) for v in views]
        z = [F.normalize(projection, dim=1) for _, projection in encoded]
        scores = [self.prototypes(projection) for projection in z]
        codes = [self.codes(i, z[i], state) for i in range(2)]
        t = self.temperature_at(state)
        loss = swav(scores, codes, temperature=t)
        logs = {**loggable(temperature=t),
                "positive_similarity": lambda: cosine_of_pairs(z[0], z[1]).mean()}
        return StepOutput(loss=loss, features=encoded[0][0].detach(), logs=logs, embedding=z[0])

    def collapse_loss(self) -> float:
        """Scores equal for every prototype: each crop's softmax is uniform, the loss log K."""
        return math.log(self.prototypes.out_features)

    @torch.no_grad()
    def codes(self, crop: int, z: Tensor, state: ScheduleState) -> Tensor:
        """Codes of this process's rows of global crop ``crop``: Sinkhorn-Knopp over the
        gathered batch (after the full queue's rows); the projections are staged for the
        queue from ``queue_start_epoch``."""
        batch = at_least_float32(gather_no_grad(z))
        rows = batch
        queue = self.queues[crop] if self.queues is not None else None
        if queue is not None and queue.num_valid == queue.size:
            rows = torch.cat([queue.negatives().to(batch.dtype), batch])
        with autocast_off(rows):
            scores = rows @ self.prototypes.weight.to(rows.dtype).t()
        codes = sinkhorn_knopp(scores, epsilon=self.sinkhorn_epsilon,
                               iterations=self.sinkhorn_iterations)[-batch.shape[0]:]
        if queue is not None and state.epoch >= self.queue_start_epoch:
            queue.stage(batch)
        start = rank() * z.shape[0]  # the engine's batches are equal on every process
        return codes[start:start + z.shape[0]]

    @torch.no_grad()
    def after_optimizer_step(self, state: ScheduleState) -> dict[str, float]:
        """The queues' staged rows committed; the prototypes back on the unit sphere."""
        logs = super().after_optimizer_step(state)
        for queue in self.queues or ():
            queue.commit()
        normalize_prototypes_(self.prototypes)
        return logs
