"""DINO (Caron et al. 2021): the student's head outputs of every view are trained to match the
EMA teacher's centred and sharpened outputs of the other global views.

What differs from the other methods: the head is DINO's (:class:`~contrastkit.models.DINOHead`,
``projector`` a :class:`~contrastkit.models.factory.DINOHeadSpec`), part of the EMA teacher; the
teacher sees the two global crops only; the loss (:func:`~contrastkit.losses.dino`) reads a
centre, a float32 buffer updated after each optimiser step from the teacher outputs of the
whole batch (every process's; accumulated micro-batches count as one batch); the teacher
temperature may be a schedule (DINO's warm-up:
:class:`~contrastkit.schedules.EpochWarmupSchedule`); the last layer stays fixed for the first
epoch (``projector.last_layer`` in :attr:`gradient_freezes`). DINO's per-parameter gradient
clipping is the engine's ``optimizer.clip_grad_per_parameter``. The cosine of the student's
outputs of the two global crops is logged as ``train/positive_similarity``. Not for
``model.performance.step: captured`` (the centre is updated after the step).
"""

from __future__ import annotations

import math
from dataclasses import asdict

import torch
from torch import Tensor, nn

from contrastkit.distributed import gather_no_grad, world_size
from contrastkit.gradients import GradientFreeze
from contrastkit.losses import Temperature, dino, resolve_temperature
from contrastkit.methods.base import ContrastiveMethod, StepOutput, cosine_of_pairs, loggable
from contrastkit.models.factory import DINOHeadSpec
from contrastkit.models.prototypes import DINOHead
from contrastkit.precision import at_least_float32
from contrastkit.schedules import Schedule, ScheduleState

#: ``main_dino.py``'s default ``--freeze_last_layer 1``.
OFFICIAL_FREEZE = GradientFreeze(until=1, unit="epoch")


class DINO(ContrastiveMethod):
    """DINO (Caron et al. 2021; facebookresearch/dino ``main_dino.py``).

    Args:
        projector: the head (:class:`~contrastkit.models.factory.DINOHeadSpec`).
        temperature: student temperature tau_s (0.1), a float or a schedule.
        teacher_temperature: tau_t, a float (0.04 by default, as the official code's) or a
            schedule, e.g. ``EpochWarmupSchedule(0.04, 0.07, 30)`` (the paper's warm-up).
        center_momentum: m of the centre's EMA (0.9).
        momentum: initial teacher EMA momentum (0.996, cosine to 1; 0.9995 for batch 256).
        freeze_last_layer: how long the last layer stays fixed (1 epoch).
        **kwargs: :class:`~contrastkit.methods.base.ContrastiveMethod` arguments (backbone,
            momentum_schedule); no predictor, no queue.

    Known differences from other codes (``docs/methods.md``): the official code forwards the
    two global crops as one batch (one set of batch-norm statistics), contrastkit each view on
    its own; solo-learn clips only the backbone's gradients.
    """

    requires_target = True
    supports_multicrop = True
    captured_step = False
    default_views = ("strong_alpha", "strong_beta")

    def __init__(
        self,
        projector: DINOHeadSpec | None = None,
        temperature: Temperature = 0.1,
        teacher_temperature: float | Schedule = 0.04,
        center_momentum: float = 0.9,
        momentum: float = 0.996,
        freeze_last_layer: GradientFreeze = OFFICIAL_FREEZE,
        **kwargs,
    ) -> None:
        if kwargs.get("predictor") is not None:
            raise ValueError("DINO has no predictor: predictor must be null")
        super().__init__(projector=projector or DINOHeadSpec(), temperature=temperature,
                         momentum=momentum, **kwargs)
        self.teacher_temperature = self.checked_temperature("teacher_temperature",
                                                            teacher_temperature)
        if not 0.0 <= center_momentum <= 1.0:
            raise ValueError(f"center_momentum must lie in [0, 1], got {center_momentum}")
        self.center_momentum = center_momentum
        self.register_buffer("center", torch.zeros(1, self.embed_dim))
        self._center_sum: Tensor | None = None
        self._center_count = 0
        self.gradient_freezes["projector.last_layer"] = freeze_last_layer

    def build_projector(self, spec: DINOHeadSpec, in_dim: int) -> nn.Module:
        """DINO's head (:class:`~contrastkit.models.DINOHead`) of ``spec``."""
        return DINOHead(in_dim, **asdict(spec))

    def objective(self, views: list[Tensor], labels: Tensor, state: ScheduleState) -> StepOutput:
        teacher = [at_least_float32(self.encode_target(v)) for v in views[:2]]
        encoded = [self.encode(v) for v in views]
        ts, tt = self.temperature_at(state), resolve_temperature(self.teacher_temperature, state)
        student = [g for _, g in encoded]
        loss = dino(student, teacher, self.center, student_temperature=ts,
                    teacher_temperature=tt)
        with torch.no_grad():  # the centre's batch: staged until the optimiser step
            rows = torch.cat(teacher)
            total = rows.sum(0).to(self.center.dtype)
            self._center_sum = total if self._center_sum is None else self._center_sum + total
            self._center_count += rows.shape[0]
        logs = {**loggable(temperature=ts, teacher_temperature=tt),
                "positive_similarity": lambda: cosine_of_pairs(student[0], student[1]).mean()}
        return StepOutput(loss=loss, features=encoded[0][0].detach(), logs=logs,
                          embedding=student[0])

    def collapse_loss(self) -> float:
        """The uniform collapse: teacher and student softmaxes uniform over the K outputs, the
        cross-entropy log K (DINO's other collapse, one output dominant, the centre prevents)."""
        return math.log(self.embed_dim)

    @torch.no_grad()
    def after_optimizer_step(self, state: ScheduleState) -> dict[str, float]:
        """Teacher EMA, then ``c <- m c + (1 - m) * mean`` of the staged teacher outputs of
        every process (DINO's centre; ``update_center`` all-reduces the same sum)."""
        logs = super().after_optimizer_step(state)
        if self._center_sum is not None:
            total = gather_no_grad(self._center_sum.unsqueeze(0)).sum(0, keepdim=True)
            mean = total / (self._center_count * world_size())
            self.center.mul_(self.center_momentum).add_(mean, alpha=1 - self.center_momentum)
            self._center_sum, self._center_count = None, 0
        return logs
