"""The shared base of the query/key methods with a momentum target branch and a memory queue.

MoCo v2 (:mod:`.moco`), ReSSL (:mod:`.ressl`) and SCE (:mod:`.sce`) share everything but the
loss (and their default views):

* the online branch embeds the *query* views, the momentum branch the *key* views
  (``views[0]`` online, ``views[1]`` target: SCE's default is strong online, weak target);
* ``symmetric``: both global views also go the other way and the two losses are averaged;
  both keys are enqueued;
* multi-crop: views after the first two are local crops, used only as queries against the
  key(s) of the global view(s) (SCE appendix D.2);
* keys are gathered from every process and staged into the queue, committed after the
  optimiser step (``ContrastiveMethod.after_optimizer_step``);
* ``shuffle_bn``: MoCo's shuffling BN (He et al., 2020): in training, the key encoder's
  batch-norm statistics come from random groups of the global key batch, over processes and
  virtual devices, instead of the local batch (:mod:`contrastkit.methods.shuffle_bn`).

The loss over several (query, key) pairs is the mean of the pair losses. With a queue, each
process computes the mean over its own queries (DDP averages the gradients); without a ready
queue the in-batch negatives are gathered from every process and each process computes the
loss of the whole global batch.
"""

from __future__ import annotations

from abc import abstractmethod

import torch
from torch import Tensor

from contrastkit.distributed import gather_no_grad, gather_with_grad, is_distributed
from contrastkit.methods.base import ContrastiveMethod, StepOutput, cosine_of_pairs, mean_logs
from contrastkit.methods.shuffle_bn import ShuffleBN
from contrastkit.precision import at_least_float32
from contrastkit.schedules import ScheduleState


class MomentumContrast(ContrastiveMethod):
    """Shared machinery of MoCo, ReSSL and SCE; subclasses define :meth:`pair_loss`.

    Args:
        symmetric: also use view 1 as query and view 0 as key, averaging both losses.
        momentum: initial EMA momentum (cosine schedule to 1).
        queue_size: memory queue rows (0: in-batch negatives).
        shuffle_bn: ``G``, the number of batch-norm groups (devices, real or virtual) the
            global key batch is shuffled into for the target encoder in training: keys of all
            processes are permuted with a permutation shared by all processes, cut into ``G``
            equal groups, each normalised with its own batch statistics, and put back in
            order. ``G`` must be a multiple of the number of processes and divide the global
            batch. 8 on one GPU simulates MoCo v2's 8 GPUs (the SCE authors' setting);
            ``G`` = processes is MoCo's cross-GPU shuffle. ``None``: keys normalised with the
            statistics of the local, unshuffled batch. Excludes ``trainer.sync_batchnorm``.
        **kwargs: other :class:`ContrastiveMethod` arguments.
    """

    requires_target = True
    supports_queue = True
    supports_multicrop = True

    def __init__(
        self,
        symmetric: bool = False,
        momentum: float = 0.99,
        queue_size: int = 4096,
        shuffle_bn: int | None = None,
        **kwargs,
    ) -> None:
        super().__init__(momentum=momentum, queue_size=queue_size, **kwargs)
        self.symmetric = symmetric
        self.shuffle_bn = shuffle_bn
        # The target's buffers are replaced by the online ones after every step ("copy"):
        # the split layers then skip their running-statistics update.
        self.key_shuffle = (
            ShuffleBN(self.target.target, shuffle_bn,
                      running_stats=self.target.buffers_policy != "copy")
            if shuffle_bn is not None else None
        )

    @torch.no_grad()
    def encode_target(self, x: Tensor) -> Tensor:
        """Target projection; in training with ``shuffle_bn``, BN statistics per shuffled group."""
        if self.key_shuffle is None or not self.target.target.training:
            return super().encode_target(x)
        with self.target_casts.applied(x):
            return self.key_shuffle(self.target.target, x)

    @abstractmethod
    def pair_loss(
        self, query: Tensor, key: Tensor, negatives: Tensor | None, state: ScheduleState
    ) -> tuple[Tensor, dict[str, float]]:
        """Loss of one (query, key) pairing against the negatives."""

    def objective(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        key_views = [0, 1] if self.symmetric else [1]
        query_views = [i for i in range(len(views)) if self.symmetric or i != 1]
        # float16/bfloat16 keys (autocast) in float32 once, for the loss and the queue alike
        keys = {i: at_least_float32(self.encode_target(views[i])) for i in key_views}
        encoded = {i: self.encode(views[i]) for i in query_views}
        negatives = self.queue_negatives()
        # In-batch negatives (no queue, or an empty one) must come from the whole
        # multi-process batch: every process then computes the loss of the global batch, as
        # SimCLR does, and the gradients equal those of one process on the combined batch.
        in_batch_global = negatives is None and is_distributed()
        losses, pair_logs = [], []
        for qi, (_, query) in encoded.items():
            if in_batch_global:
                query = gather_with_grad(query)
            # Under bf16/fp16 autocast the projections are low precision while the queue
            # stores float32 rows: the loss computes in float32 (exact casts of the
            # projections; the queue is not rounded to bf16).
            dtype = torch.promote_types(query.dtype, torch.float32)
            query = query.to(dtype)
            bank = negatives.to(dtype) if negatives is not None else None
            for ki, key in keys.items():
                if qi != ki:
                    key = gather_no_grad(key) if in_batch_global else key
                    loss, logs = self.pair_loss(query, key.to(dtype), bank, state)
                    losses.append(loss)
                    pair_logs.append(logs)
        if self.queue is not None:
            staged = [keys[i] for i in key_views]
            self.queue.stage(staged[0] if len(staged) == 1 else torch.cat(staged))
        features, query0 = encoded[0]
        key1 = keys[1]
        logs = mean_logs(pair_logs)  # each pair's values, averaged as the losses are
        logs["positive_similarity"] = lambda: cosine_of_pairs(query0, key1).mean()
        # one pair: its loss itself (the mean of one value, without a stack and a division)
        loss = losses[0] if len(losses) == 1 else torch.stack(losses).mean()
        return StepOutput(loss=loss, features=features.detach(), logs=logs, embedding=query0)
