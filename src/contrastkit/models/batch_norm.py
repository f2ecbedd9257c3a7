"""Batch-norm layers that leave ``num_batches_tracked`` alone when nothing reads it.

``torch.nn.BatchNorm*d`` adds 1 to its ``num_batches_tracked`` buffer at every training forward.
The counter is read only when ``momentum`` is ``None`` (the running statistics are then a
cumulative average, ``1 / num_batches_tracked`` its weight); with a ``momentum`` (0.1 by
default, the value every contrastkit model uses) nothing reads it: not the forward, not the
momentum branch's buffer update (which copies or keeps integer buffers, never averages them),
not the evaluation, and the exported layouts drop it (detectron2) or keep it unread
(torchvision, whose layers also have a momentum). The increment is still one GPU kernel per
layer and step (21 for a ResNet-18 with its projector).

Our choice (documented, tested): these layers compute exactly what ``torch.nn.BatchNorm*d``
computes (the same ``F.batch_norm`` call: output, running mean and variance), but with a
``momentum`` they do not count batches, so ``num_batches_tracked`` stays at the value it was
built or loaded with (0 for a new model). With ``momentum=None`` they count as torch does.
The buffer is kept, so ``state_dict`` keys, checkpoints and weight files are unchanged.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "UncountedBatchNorm"]


class UncountedBatchNorm(_BatchNorm):
    """A batch norm whose training forward skips the unread batch counter (module docstring)."""

    def forward(self, input: Tensor) -> Tensor:
        counted = self.momentum is None or self.num_batches_tracked is None
        if counted or not (self.training and self.track_running_stats):
            return super().forward(input)
        self._check_input_dim(input)
        return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                            True, self.momentum, self.eps)


class BatchNorm1d(UncountedBatchNorm, nn.BatchNorm1d):
    """``nn.BatchNorm1d`` without the unread batch counter (:class:`UncountedBatchNorm`)."""


class BatchNorm2d(UncountedBatchNorm, nn.BatchNorm2d):
    """``nn.BatchNorm2d`` without the unread batch counter (:class:`UncountedBatchNorm`)."""


class BatchNorm3d(UncountedBatchNorm, nn.BatchNorm3d):
    """``nn.BatchNorm3d`` without the unread batch counter (:class:`UncountedBatchNorm`)."""
