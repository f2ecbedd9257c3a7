"""Former home of the temperature functions, now :mod:`contrastkit.losses.dystress`.

Kept so that ``from contrastkit.losses.temperature import DySTreSSTemperature`` and configs naming
``contrastkit.losses.temperature.DySTreSSTemperature`` still work; new code imports from
:mod:`contrastkit.losses` or :mod:`contrastkit.losses.dystress`.
"""

from collections.abc import Callable

from torch import Tensor

from contrastkit.losses.dystress import (
    DySTreSSTemperature,
    ExponentialTemperature,
    LinearTemperature,
    MonotonicCosineTemperature,
    PairTemperature,
)

__all__ = [
    "DySTreSSTemperature",
    "ExponentialTemperature",
    "LinearTemperature",
    "MonotonicCosineTemperature",
    "PairTemperature",
    "TemperatureFn",
]

#: Former type of a temperature function (see :class:`contrastkit.losses.SimilarityTemperature`).
TemperatureFn = Callable[[Tensor], Tensor]
