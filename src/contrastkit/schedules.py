"""Schedules for temperatures and loss coefficients.

One interface: every schedule is a :class:`Schedule`, a small callable ``schedule(state) ->
value`` taking a :class:`ScheduleState` (step, total steps, fractional epoch, total epochs and,
for alignment-adaptive temperatures, the positive-pair cosine similarities). Schedules hold no
mutable state, so resuming from a checkpoint only needs the step/epoch.

This module holds the generic schedules (constant, linear, cosine, warm-up in steps or in whole
epochs as DINO's teacher temperature), usable for any coefficient such as SCE's ``lambda`` or a
temperature, and the temperature schedules of Kukleva et al. 2023 and MACL (Huang et al. 2023).
What else a temperature may be: :mod:`contrastkit.losses.temperature`. The momentum (EMA)
coefficient schedule lives with the momentum branch in :mod:`contrastkit.models.momentum`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from contrastkit.cosine import cosine_anneal

__all__ = [
    "ConstantSchedule",
    "CosineSchedule",
    "EpochWarmupSchedule",
    "KuklevaCosineTemperature",
    "LinearSchedule",
    "MACLTemperature",
    "Schedule",
    "ScheduleState",
    "WarmupSchedule",
]


@dataclass(frozen=True)
class ScheduleState:
    """Where training stands when a schedule is evaluated.

    Attributes:
        step: optimiser steps already taken (0-based, >= 0).
        total_steps: total optimiser steps of the run (> 0).
        epoch: epochs elapsed, fractional (``step / steps_per_epoch``), >= 0.
        total_epochs: total epochs of the run (> 0).
        positive_similarity: cosine similarities of the positive pairs of the current batch
            (any shape) or their mean; only alignment-adaptive schedules read it.
    """

    step: int = 0
    total_steps: int = 1
    epoch: float = 0.0
    total_epochs: float = 1.0
    positive_similarity: Tensor | float | None = None

    def __post_init__(self) -> None:
        if self.step < 0:
            raise ValueError(f"step must be >= 0, got {self.step}")
        if self.total_steps <= 0:
            raise ValueError(f"total_steps must be > 0, got {self.total_steps}")
        if self.epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {self.epoch}")
        if self.total_epochs <= 0:
            raise ValueError(f"total_epochs must be > 0, got {self.total_epochs}")

    @property
    def progress(self) -> float:
        """``min(step / total_steps, 1)``."""
        return min(self.step / self.total_steps, 1.0)


class Schedule(ABC):
    """Base of every schedule: maps a :class:`ScheduleState` to a value.

    A method's ``temperature`` that is a ``Schedule`` is evaluated at each step
    (:func:`contrastkit.losses.temperature.resolve_temperature`); a config names a schedule by its
    ``class_path``, which a saved config keeps.
    """

    @abstractmethod
    def __call__(self, state: ScheduleState) -> float | Tensor:
        """The value at ``state``."""


@dataclass(frozen=True)
class ConstantSchedule(Schedule):
    """``value(t) = value``."""

    value: float

    def __call__(self, state: ScheduleState) -> float:
        return float(self.value)


@dataclass(frozen=True)
class LinearSchedule(Schedule):
    """``value(p) = start + (end - start) * p`` with ``p = min(step / total_steps, 1)``."""

    start: float
    end: float

    def __call__(self, state: ScheduleState) -> float:
        return self.start + (self.end - self.start) * state.progress


@dataclass(frozen=True)
class CosineSchedule(Schedule):
    """Half-cosine from ``start`` (step 0) to ``end`` (``step >= total_steps``).

    ``value(p) = end + (start - end) * (1 + cos(pi * p)) / 2``, ``p = min(step / total, 1)``.
    """

    start: float
    end: float

    def __call__(self, state: ScheduleState) -> float:
        return cosine_anneal(self.start, self.end, state.progress)


@dataclass(frozen=True)
class WarmupSchedule(Schedule):
    """Linear warm-up from ``start`` to ``end`` over ``warmup_steps``, then constant ``end``.

    ``value(s) = start + (end - start) * min(s / warmup_steps, 1)`` (``end`` when
    ``warmup_steps == 0``). Usable for a target-temperature warm-up of SCE's ``tau_m``.
    Reading of the SCE paper (Denize et al., appendix D.1/D.2, Tables 21 and 24): the
    warm-ups it describes are learning-rate warm-ups (5 epochs for SGD, 10 epochs with LARS
    on ImageNet); the temperatures ``tau = 0.1`` and ``tau_m`` are constants there, so the
    paper-faithful choice for ``tau_m`` is :class:`ConstantSchedule` and this class is an
    option, not the default.

    Raises:
        ValueError: if ``warmup_steps`` is negative.
    """

    start: float
    end: float
    warmup_steps: int

    def __post_init__(self) -> None:
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")

    def __call__(self, state: ScheduleState) -> float:
        if self.warmup_steps == 0:
            return float(self.end)
        frac = min(state.step / self.warmup_steps, 1.0)
        return self.start + (self.end - self.start) * frac


@dataclass(frozen=True)
class EpochWarmupSchedule(Schedule):
    """Linear warm-up in whole epochs from ``start`` to ``end``, then constant ``end``: DINO's
    teacher-temperature warm-up (Caron et al. 2021; facebookresearch/dino ``DINOLoss``:
    ``np.linspace(warmup_teacher_temp, teacher_temp, warmup_teacher_temp_epochs)`` indexed by the
    epoch, then ``teacher_temp``; lightly's and solo-learn's ``DINOLoss`` do the same).

    With ``e`` the current epoch (``floor(state.epoch)``, so the value changes at epoch starts)
    and ``W = epochs``::

        e <  W : value = start + (end - start) * e / (W - 1)     (start when W = 1)
        e >= W : value = end

    so ``end`` is first reached in epoch ``W - 1``, as ``np.linspace``'s last point. ``W = 0``:
    ``end`` throughout. Unlike :class:`WarmupSchedule` (linear in steps), the value is constant
    within an epoch.

    Raises:
        ValueError: if ``epochs`` is negative or not an int.
    """

    start: float
    end: float
    epochs: int

    def __post_init__(self) -> None:
        if isinstance(self.epochs, bool) or not isinstance(self.epochs, int) or self.epochs < 0:
            raise ValueError(f"epochs must be an int >= 0, got {self.epochs!r}")

    def __call__(self, state: ScheduleState) -> float:
        epoch = math.floor(state.epoch + _EPOCH_ROUNDING)
        if epoch >= self.epochs:
            return float(self.end)
        if self.epochs == 1:
            return float(self.start)
        return self.start + (self.end - self.start) * epoch / (self.epochs - 1)


#: ``state.epoch`` is ``step / steps_per_epoch`` in floating point: an epoch's first step may read
#: a hair below its whole number.
_EPOCH_ROUNDING = 1e-9


@dataclass(frozen=True)
class KuklevaCosineTemperature(Schedule):
    """Periodic cosine temperature of Kukleva et al. 2023 (ICLR, "Temperature Schedules for
    Self-Supervised Contrastive Methods on Long-Tail Data"), cited by Manna et al. 2023 as [28].

    ``tau(t) = t_min + (t_max - t_min) * (1 + cos(2 pi t / period + offset)) / 2``

    with ``t`` the fractional epoch (``unit="epoch"``, the paper's setting) or the optimiser
    step (``unit="step"``). ``tau`` oscillates between ``t_max`` (large: group-wise
    discrimination) and ``t_min`` (small: instance discrimination); with ``offset=0`` it starts
    at ``t_max``. Defaults are our reading of the paper's setting (``tau_- = 0.1``,
    ``tau_+ = 1.0``, period 400 epochs for 2000-epoch long-tail training); the formula is
    the paper's, the defaults should be checked against it for exact reproduction.

    Raises:
        ValueError: unless ``0 < t_min <= t_max`` and ``period > 0``.
    """

    t_min: float = 0.1
    t_max: float = 1.0
    period: float = 400.0
    offset: float = 0.0
    unit: Literal["epoch", "step"] = "epoch"

    def __post_init__(self) -> None:
        if not 0 < self.t_min <= self.t_max:
            raise ValueError(f"need 0 < t_min <= t_max, got t_min={self.t_min}, t_max={self.t_max}")
        if not self.period > 0:
            raise ValueError(f"period must be > 0, got {self.period}")
        if self.unit not in ("epoch", "step"):
            raise ValueError(f"unit must be 'epoch' or 'step', got {self.unit!r}")

    def __call__(self, state: ScheduleState) -> float:
        t = state.epoch if self.unit == "epoch" else state.step
        phase = 2.0 * math.pi * t / self.period + self.offset
        return self.t_min + (self.t_max - self.t_min) * 0.5 * (1.0 + math.cos(phase))


@dataclass(frozen=True)
class MACLTemperature(Schedule):
    """Alignment-adaptive temperature as in MACL (Huang et al. 2023, ICML, "Model-Aware
    Contrastive Learning: Towards Escaping the Dilemmas"), cited by Manna et al. 2023 as [55].

    ``tau = max(t0 * (1 + alpha * (A - a0)), min_value)``

    where ``A`` is the alignment magnitude: the mean cosine similarity of the positive pairs
    of the current batch, **detached** (the temperature is not differentiated). Better
    aligned models (large ``A``) get a larger temperature (more tolerance), poorly aligned
    ones a smaller one (more uniformity). Defaults ``t0=0.1, alpha=0.5, a0=0`` follow the
    MACL SimCLR setting. MACL also reweights the loss by the detached ``1 / (1 - P_pos)``;
    that belongs to the loss, not to this schedule. The clamp at ``min_value`` (> 0) only
    matters for ``alpha * (a0 - A) >= 1``, impossible with the defaults (``tau >= 0.05``).

    Returns a 0-d detached tensor when ``positive_similarity`` is a tensor (no host sync),
    else a float.

    Raises:
        ValueError: on ``t0 <= 0``, ``alpha < 0``, ``min_value <= 0``, or when the state has no
            ``positive_similarity`` (or an empty one).
    """

    t0: float = 0.1
    alpha: float = 0.5
    a0: float = 0.0
    min_value: float = 1e-3

    def __post_init__(self) -> None:
        if not self.t0 > 0:
            raise ValueError(f"t0 must be > 0, got {self.t0}")
        if self.alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {self.alpha}")
        if not self.min_value > 0:
            raise ValueError(f"min_value must be > 0, got {self.min_value}")

    def __call__(self, state: ScheduleState) -> float | Tensor:
        sim = state.positive_similarity
        if sim is None:
            raise ValueError("MACLTemperature needs ScheduleState.positive_similarity")
        if isinstance(sim, Tensor):
            if sim.numel() == 0:
                raise ValueError("positive_similarity is empty")
            alignment = sim.detach().to(torch.float64).mean()
            tau = self.t0 * (1.0 + self.alpha * (alignment - self.a0))
            return tau.clamp_min(self.min_value).to(
                sim.dtype if sim.is_floating_point() else torch.float32
            )
        tau_f = self.t0 * (1.0 + self.alpha * (float(sim) - self.a0))
        return max(tau_f, self.min_value)
