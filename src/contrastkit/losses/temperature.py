"""What a ``temperature`` may be, its one check and its value at a training step.

The ``temperature`` of a contrastive loss or of a pretraining method is a :data:`Temperature`,
one of:

* a float > 0, the same for every pair and every step (a loss also takes a 0-d float tensor:
  a schedule's value computed on the device);
* a :class:`SimilarityTemperature`: a function mapping a tensor of cosine similarities ``s`` in
  [-1, 1] to a tensor of the same shape of temperatures > 0 (the DySTreSS functions of
  :mod:`contrastkit.losses.dystress`), or a :class:`PairTemperature` with one temperature for
  positive and one for negative pairs. The losses of :mod:`contrastkit.losses.infonce` and
  :mod:`contrastkit.losses.hard_contrastive` evaluate it on *detached* similarities (the
  temperature is a per-pair constant for the gradient, as in DySTreSS Alg. 3 where ``temp`` is
  computed from ``s.detach()``) and divide every logit by it, the positive's included;
* a :class:`~contrastkit.schedules.Schedule` of the training state (the Kukleva and MACL
  temperature schedules and the generic ones of :mod:`contrastkit.schedules`). A method
  evaluates it at each step with :func:`resolve_temperature` and hands the loss its value.

Every loss and method validates its temperature with :func:`check_temperature`.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

from torch import Tensor

from contrastkit.checks import check_positive_float
from contrastkit.hot_path import in_hot_path
from contrastkit.schedules import Schedule, ScheduleState

__all__ = [
    "PairTemperature",
    "SimilarityTemperature",
    "Temperature",
    "check_temperature",
    "resolve_temperature",
    "split_temperature",
]


class SimilarityTemperature(ABC):
    """Base of the per-pair temperatures: cosine similarities -> temperatures > 0, same shape.

    A config names one by its ``class_path`` (which a saved config keeps); in Python any
    callable with this contract is accepted by the losses as well.
    """

    @abstractmethod
    def __call__(self, s: Tensor) -> Tensor:
        """Temperatures of the pairs whose cosine similarities are ``s``."""


@dataclass(frozen=True)
class PairTemperature:
    """Separate temperatures for the positive and the negative logits (the CIFAR code of Manna et
    al. 2023).

    Pass it as ``temperature`` to ``info_nce``, ``nt_xent``, ``dcl`` or ``hard_contrastive``:
    the positive logit of each anchor is divided by ``positive`` (a float, or a function
    evaluated on the detached positive similarity) and every negative logit by ``negative``.
    ``PairTemperature(t, t)`` is the same as ``temperature=t``.

    Args:
        positive: float > 0 or temperature function for positive pairs.
        negative: float > 0 or temperature function for negative pairs.
    """

    positive: float | SimilarityTemperature
    negative: float | SimilarityTemperature

    def __post_init__(self) -> None:
        for name in ("positive", "negative"):
            value = getattr(self, name)
            if isinstance(value, Schedule):
                raise ValueError(f"temperature.{name} must be a float or a per-pair temperature, "
                                 f"got a schedule ({type(value).__name__})")
            if not callable(value):
                check_positive_float(f"temperature.{name}", value)


#: What a ``temperature`` may be, in a loss or a method (see the module docstring). A loss takes
#: the first three (and a 0-d tensor, a schedule's value on the device); a method also takes a
#: schedule, which it evaluates at each step.
Temperature = float | SimilarityTemperature | PairTemperature | Schedule


def _check_value(name: str, value: float | Tensor) -> None:
    """A finite number > 0, or a 0-d float tensor that is one (read back only outside
    :func:`contrastkit.hot_path.hot_path`, where that read would make a GPU wait)."""
    if isinstance(value, Tensor):
        if value.dim() != 0 or not value.is_floating_point():
            raise ValueError(
                f"{name} must be a number or a 0-d float tensor, got a {value.dtype} tensor of "
                f"shape {tuple(value.shape)}"
            )
        if not in_hot_path():
            scalar = float(value)
            if not math.isfinite(scalar) or scalar <= 0:
                raise ValueError(f"{name} must be finite and > 0, got {scalar}")
        return
    check_positive_float(name, value)


def check_temperature(
    name: str, temperature: object, *, schedule: bool = False, per_pair: bool = True
) -> None:
    """Raise ``ValueError``, naming ``name``, unless ``temperature`` is a valid temperature.

    A float > 0 (or a 0-d float tensor) is always valid; a :class:`~contrastkit.schedules.Schedule`
    only where ``schedule`` (a method, which evaluates it); a per-pair temperature (a function of
    the similarity, or a :class:`PairTemperature`, which validates itself) only where
    ``per_pair`` (losses that divide each logit by its own temperature).
    """
    kind = type(temperature).__name__
    if isinstance(temperature, Schedule):
        if not schedule:
            raise ValueError(
                f"{name} is a schedule ({kind}): a loss needs its value at a training step, "
                "resolve_temperature(temperature, state) gives it"
            )
        return
    if isinstance(temperature, PairTemperature) or (
        callable(temperature) and not isinstance(temperature, Tensor)
    ):
        if not per_pair:
            raise ValueError(
                f"{name} is a per-pair temperature ({kind}), which only info_nce, nt_xent, dcl "
                "and hard_contrastive take (SimCLR, MoCo): give a float or a schedule"
            )
        return
    _check_value(name, temperature)  # type: ignore[arg-type]


def split_temperature(temperature: Temperature) -> tuple[object, object]:
    """The (positive, negative) temperatures of ``temperature``."""
    if isinstance(temperature, PairTemperature):
        return temperature.positive, temperature.negative
    return temperature, temperature


def resolve_temperature(
    temperature: Temperature, state: ScheduleState, positive: Tensor | None = None
) -> float | Tensor | SimilarityTemperature | PairTemperature:
    """The temperature a loss gets at ``state``: a schedule's value there, anything else as is.

    Args:
        temperature: a method's temperature setting.
        state: where training stands.
        positive: cosine similarities of the batch's positive pairs, for alignment-adaptive
            schedules (:class:`~contrastkit.schedules.MACLTemperature`); detached here.

    Returns:
        For a schedule, its value: a float, or a 0-d tensor on the embeddings' device (passed
        to the loss as is: reading it on the host would make a GPU wait). Otherwise
        ``temperature`` itself (a float, or a per-pair temperature the loss evaluates).
    """
    if not isinstance(temperature, Schedule):
        return temperature
    if positive is not None:
        state = dataclasses.replace(state, positive_similarity=positive.detach())
    value = temperature(state)
    return value if isinstance(value, Tensor) else float(value)
