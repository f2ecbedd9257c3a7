"""MoCo v3 (Chen, Xie & He 2021): in-batch InfoNCE of the online predictions against the EMA
encoder's keys of the other view, no queue (:func:`contrastkit.losses.moco_v3`, with the
official code's factor 2 tau).

Distributed, as the official code (facebookresearch/moco-v3 ``moco/builder.py``,
``contrastive_loss``): the keys are gathered from every process without gradient, each process
computes the loss of its own queries against all of them (its positives at rows ``rank * b``
onward, the code's label offset), and DDP averages the gradients, which equals one process on
the combined batch.
"""

from __future__ import annotations

from typing import Literal

from torch import Tensor

from contrastkit.distributed import gather_no_grad, rank
from contrastkit.losses import moco_v3
from contrastkit.methods.base import ContrastiveMethod, StepOutput, cosine_of_pairs, loggable
from contrastkit.models.factory import BackboneSpec, HeadSpec
from contrastkit.precision import at_least_float32
from contrastkit.schedules import Schedule, ScheduleState


class MoCoV3(ContrastiveMethod):
    """MoCo v3 for ResNets (``moco/builder.py``, ``MoCo_ResNet``): loss
    ``ctr(q1, k2) + ctr(q2, k1)``, summed as in the official code.

    Heads of ``MoCo_ResNet`` (``_build_mlp``: no linear layer has a bias): projector 2 layers
    with BN after the hidden one and a final BN without affine parameters
    (``HeadSpec(4096, 256, 2, "all")``), predictor 2 layers with BN after the hidden one and no
    final BN (``HeadSpec(4096, 256, 2, "hidden", last_bias=False)``). The target's momentum
    follows the cosine
    schedule from ``momentum`` to 1 (the official ``--moco-m-cos``) or stays constant. The
    official code updates the target just before each forward, with that step's momentum;
    here it is updated after each optimiser step, with the momentum of the step just taken
    (the same updates, each with the schedule's value one step earlier).

    Args:
        backbone: backbone description.
        projector: projector (default MoCo v3's, above).
        predictor: predictor (default MoCo v3's form, above, with the projector's sizes).
        momentum: initial EMA momentum (``--moco-m``, 0.99).
        momentum_schedule: ``cosine`` or ``constant``.
        temperature: tau (``--moco-t``, 1.0 for ResNets; solo-learn's CIFAR recipe 0.2): a
            float or a schedule.
    """

    requires_target = True
    default_views = ("strong_alpha", "strong_beta")

    def __init__(
        self,
        backbone: BackboneSpec | None = None,
        projector: HeadSpec | None = None,
        predictor: HeadSpec | None = None,
        momentum: float = 0.99,
        momentum_schedule: Literal["cosine", "constant"] = "cosine",
        temperature: float | Schedule = 1.0,
    ) -> None:
        projector = projector or HeadSpec(4096, 256, 2, "all")
        predictor = predictor or HeadSpec(projector.hidden_dim, projector.out_dim, 2, "hidden",
                                          last_bias=False)
        super().__init__(backbone=backbone, projector=projector, predictor=predictor,
                         momentum=momentum, momentum_schedule=momentum_schedule,
                         temperature=temperature)

    def objective(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        f1, q1 = self.encode(views[0])
        _, q2 = self.encode(views[1])
        # float16/bfloat16 keys (autocast) in float32, gathered from every process in rank order
        k1, k2 = (gather_no_grad(at_least_float32(self.encode_target(v))) for v in views[:2])
        offset = rank() * q1.shape[0]
        t = self.temperature_at(state, (q1, k2[offset : offset + q1.shape[0]]))
        q1, q2 = q1.to(k1.dtype), q2.to(k1.dtype)
        loss = (moco_v3(q1, k2, temperature=t, key_offset=offset)
                + moco_v3(q2, k1, temperature=t, key_offset=offset))
        positives = k2[offset : offset + q1.shape[0]]
        logs = {**loggable(temperature=t),
                "positive_similarity": lambda: cosine_of_pairs(q1, positives).mean()}
        return StepOutput(loss=loss, features=f1.detach(), logs=logs, embedding=q1)
