"""Schedules for temperatures and loss coefficients.

One interface: every schedule is a :class:`Schedule`, a small callable ``schedule(state) ->
value`` taking a :class:`ScheduleState` (step, total steps, fractional epoch, total epochs and,
for alignment-adaptive temperatures, the positive-pair cosine similarities). Schedules hold no
mutable state, so resuming from a checkpoint only needs the step/epoch.

This module holds the generic schedules (constant, linear, cosine, warm-up), usable for any
coefficient such as SCE's ``lambda`` or a temperature. The temperature schedules of particular
papers (Kukleva et al. 2023, MACL of Huang et al. 2023) are temperature choices beside the
DySTreSS ones in :mod:`contrastkit.losses.dystress`. The momentum (EMA) coefficient schedule
lives with the momentum branch in :mod:`contrastkit.models.momentum`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from torch import Tensor

from contrastkit.cosine import cosine_anneal

__all__ = [
    "ConstantSchedule",
    "CosineSchedule",
    "LinearSchedule",
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
    (:func:`contrastkit.losses.dystress.resolve_temperature`); a config names a schedule by its
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


#: Former name of :class:`Schedule` (a union of the schedule classes), kept for imports.
AnySchedule = Schedule

_MOVED = ("KuklevaCosineTemperature", "MACLTemperature")


def __getattr__(name: str) -> type[Schedule]:
    """The temperature schedules of Kukleva et al. and MACL, which now live beside the DySTreSS
    temperatures in :mod:`contrastkit.losses.dystress`, under their former path (imported
    lazily: that module imports this one)."""
    if name in _MOVED:
        from contrastkit.losses import dystress

        return getattr(dystress, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
