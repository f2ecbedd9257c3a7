"""W-MSE (Ermolov et al. 2021): the two views' projections are whitened over random
sub-batches and their normalised MSE minimised (:func:`contrastkit.losses.wmse`); no target
branch, no negatives.

Distributed, as the official code computes it: that code (htdt/self-supervised @ d9662c8,
``train.py``, ``model.py``) runs in one process, the backbone wrapped in ``nn.DataParallel``,
so the projector, the sub-batch draw and the whitening see the whole batch. Here the
projections are gathered from every process with gradient, one partition into sub-batches is
drawn on process 0 and shared, and every process computes the loss of the global batch: the
gradients equal one process's on the combined batch (solo-learn instead whitens each process's
own batch).
"""

from __future__ import annotations

from torch import Tensor

from contrastkit.distributed import broadcast_from_rank0, gather_with_grad
from contrastkit.losses.wmse import draw_sub_batches, wmse
from contrastkit.methods.base import ContrastiveMethod, StepOutput, cosine_of_pairs
from contrastkit.models.factory import BackboneSpec, HeadSpec
from contrastkit.schedules import ScheduleState


class WMSE(ContrastiveMethod):
    """W-MSE 2 (two views per image).

    The projector runs on each view's batch (as solo-learn's; the official code runs it once on
    both views' concatenated features, so its batch norm sees both views together).

    Args:
        backbone: backbone description.
        projector: projector (W-MSE's CIFAR head: 2 layers, BN after the hidden one, 1024 hid,
            64 out).
        w_size: rows of a whitening sub-batch (``--w_size``, 128 on CIFAR); must divide the
            global batch and exceed the projector's output size. ``None``: the whole batch.
        w_iter: draws of the sub-batches per step (``--w_iter``).
        eps: shrinkage of the covariance towards the identity (``--w_eps``, 0).
        detach_second: solo-learn's loss, the second view detached (see
            :mod:`contrastkit.losses.wmse`); False: the official code's.
    """

    default_views = ("simclr_cifar", "simclr_cifar")

    def __init__(
        self,
        backbone: BackboneSpec | None = None,
        projector: HeadSpec | None = None,
        w_size: int | None = 128,
        w_iter: int = 1,
        eps: float = 0.0,
        detach_second: bool = False,
    ) -> None:
        projector = projector or HeadSpec(1024, 64)
        super().__init__(backbone=backbone, projector=projector)
        if w_size is not None and (isinstance(w_size, bool) or not isinstance(w_size, int)
                                   or w_size <= projector.out_dim):
            raise ValueError(f"w_size must be an int above projector.out_dim "
                             f"({projector.out_dim}), got {w_size!r}")
        if isinstance(w_iter, bool) or not isinstance(w_iter, int) or w_iter < 1:
            raise ValueError(f"w_iter must be a positive int, got {w_iter!r}")
        if not 0.0 <= eps <= 1.0:
            raise ValueError(f"eps must lie in [0, 1], got {eps}")
        self.w_size, self.w_iter, self.eps = w_size, w_iter, eps
        self.detach_second = detach_second

    def objective(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        f1, z1 = self.encode(views[0])
        _, z2 = self.encode(views[1])
        z1, z2 = gather_with_grad(z1), gather_with_grad(z2)
        w_size = self.w_size or z1.shape[0]
        if z1.shape[0] % w_size:
            raise ValueError(f"WMSE: w_size {w_size} must divide the global batch of "
                             f"{z1.shape[0]} (data.batch_size times the processes)")
        rows = broadcast_from_rank0(draw_sub_batches(z1.shape[0], w_size, self.w_iter,
                                                     device=z1.device))
        loss = wmse(z1, z2, w_size=w_size, w_iter=self.w_iter, eps=self.eps,
                    detach_second=self.detach_second, sub_batches=rows)
        logs = {"positive_similarity": lambda: cosine_of_pairs(z1, z2).mean()}
        return StepOutput(loss=loss, features=f1.detach(), logs=logs, embedding=z1)
