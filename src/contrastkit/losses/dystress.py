"""Temperatures as functions of each pair's cosine similarity (Manna et al. 2023, DySTreSS).

Each is a :class:`~contrastkit.losses.temperature.SimilarityTemperature`, a ``temperature`` the
losses of :mod:`contrastkit.losses.infonce` and :mod:`contrastkit.losses.hard_contrastive` take
(what else a temperature may be: :mod:`contrastkit.losses.temperature`). Every function here
clamps ``s`` to [-1, 1] first, so rounding that pushes a cosine a hair past 1 cannot move the
temperature outside [t_min, t_max].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from contrastkit.checks import check_positive_float
from contrastkit.losses.temperature import SimilarityTemperature

__all__ = [
    "DySTreSSTemperature",
    "ExponentialTemperature",
    "LinearTemperature",
    "MonotonicCosineTemperature",
]


def _check_range(t_min: float, t_max: float) -> None:
    check_positive_float("t_min", t_min)
    check_positive_float("t_max", t_max)
    if t_max < t_min:
        raise ValueError(f"t_max must be >= t_min, got t_min={t_min}, t_max={t_max}")


@dataclass(frozen=True)
class DySTreSSTemperature(SimilarityTemperature):
    r"""DySTreSS cosine temperature, vanilla (Alg. 1) or shifted (Alg. 2) of Manna et al. 2023.

    Alg. 1 (``shift`` and ``scale`` None):

    .. math:: \tau(s) = \tau_{min} + \tfrac12 (\tau_{max} - \tau_{min})(1 + \cos(\pi (1 + s)))

    so ``tau(-1) = tau(1) = t_max`` and ``tau(0) = t_min``.

    Alg. 2 (shift :math:`\Delta s`, scale :math:`k`), read exactly as printed:

    .. math::
        \tau(s) = \begin{cases}
            \tau_{min} + \tfrac{\Delta\tau}{2}\bigl(1 + \cos(\tfrac{\pi}{k}(\Delta s + s))\bigr)
              & \text{if } (\Delta s \le 0 \wedge s \le -\Delta s)
                \vee (\Delta s \ge 0 \wedge s \ge -\Delta s) \\
            \tau_{max} & \text{otherwise}
        \end{cases}

    Reading: the cosine bump starts at :math:`\tau_{max}` at :math:`s = -\Delta s` (so the
    function is continuous), reaches :math:`\tau_{min}` at :math:`s = -\Delta s + k` (for
    :math:`\Delta s > 0`, the side :math:`s \ge -\Delta s`) or :math:`s = -\Delta s - k`
    (for :math:`\Delta s < 0`, the side :math:`s \le -\Delta s`) and is back at
    :math:`\tau_{max}` at :math:`s = -\Delta s \pm 2k`; the other side is held at
    :math:`\tau_{max}`. Table 15's pairs (0.2, 0.6), (0.4, 0.7), (-0.2, 0.6), (-0.4, 0.7)
    all satisfy :math:`2k = 1 + |\Delta s|`, i.e. the bump ends exactly at ``s = +-1``; this
    class does not enforce that. With :math:`\Delta s = 0` both conditions hold everywhere,
    so the bump covers the whole range (maximum at ``s = 0``, minima at ``s = +-k``), as
    printed. ``shift=1, scale=1`` reproduces Alg. 1 exactly.

    Args:
        t_min: smallest temperature, > 0.
        t_max: largest temperature, >= ``t_min``.
        shift: :math:`\Delta s` of Alg. 2 (finite), or None for Alg. 1.
        scale: :math:`k` of Alg. 2 (> 0), or None for Alg. 1. Give both or neither.
    """

    t_min: float = 0.1
    t_max: float = 0.2
    shift: float | None = None
    scale: float | None = None

    def __post_init__(self) -> None:
        _check_range(self.t_min, self.t_max)
        if (self.shift is None) != (self.scale is None):
            raise ValueError(
                "shift and scale must be given together (Alg. 2) or both left None (Alg. 1), "
                f"got shift={self.shift}, scale={self.scale}"
            )
        if self.shift is not None:
            if isinstance(self.shift, bool) or not isinstance(self.shift, (int, float)):
                raise ValueError(f"shift must be a number, got {type(self.shift).__name__}")
            if not math.isfinite(self.shift):
                raise ValueError(f"shift must be finite, got {self.shift}")
            check_positive_float("scale", self.scale)

    def __call__(self, s: Tensor) -> Tensor:
        s = s.clamp(-1.0, 1.0)
        half_range = 0.5 * (self.t_max - self.t_min)
        if self.shift is None:
            return self.t_min + half_range * (1.0 + torch.cos(math.pi * (1.0 + s)))
        shift, scale = float(self.shift), float(self.scale)
        bump = self.t_min + half_range * (1.0 + torch.cos((math.pi / scale) * (shift + s)))
        on_bump = ((s <= -shift) & (shift <= 0)) | ((s >= -shift) & (shift >= 0))
        return torch.where(on_bump, bump, self.t_max)


@dataclass(frozen=True)
class MonotonicCosineTemperature(SimilarityTemperature):
    r"""Monotonic cosine temperature of Manna et al. 2023, appendix C (Table 16).

    Appendix C gives no formula, only "minimum at s = -1 and maximum at s = +1". We use the
    half cosine period between those points:

    .. math:: \tau(s) = \tau_{min} + \tfrac12 (\tau_{max} - \tau_{min})(1 + \sin(\pi s / 2))

    (equal to :math:`\tau_{min} + \frac12\Delta\tau(1 - \cos(\pi(1 + s)/2))`), so
    ``tau(-1) = t_min``, ``tau(0) = (t_min + t_max) / 2``, ``tau(1) = t_max``.
    """

    t_min: float = 0.1
    t_max: float = 0.2

    def __post_init__(self) -> None:
        _check_range(self.t_min, self.t_max)

    def __call__(self, s: Tensor) -> Tensor:
        s = s.clamp(-1.0, 1.0)
        return self.t_min + 0.5 * (self.t_max - self.t_min) * (1.0 + torch.sin(0.5 * math.pi * s))


@dataclass(frozen=True)
class LinearTemperature(SimilarityTemperature):
    r"""Linear temperature of Manna et al. 2023, Table 10 (which gives no formula; ours).

    .. math:: \tau(s) = \tau_{min} + (\tau_{max} - \tau_{min}) \, |s|

    It has the slopes DySTreSS Proposition 1 asks for (negative for s < 0, positive for
    s > 0), ``tau(0) = t_min`` and ``tau(-1) = tau(1) = t_max`` like Alg. 1.
    """

    t_min: float = 0.1
    t_max: float = 0.2

    def __post_init__(self) -> None:
        _check_range(self.t_min, self.t_max)

    def __call__(self, s: Tensor) -> Tensor:
        return self.t_min + (self.t_max - self.t_min) * s.clamp(-1.0, 1.0).abs()


@dataclass(frozen=True)
class ExponentialTemperature(SimilarityTemperature):
    r"""Exponential temperature of Manna et al. 2023, Table 10 (no formula given; ours).

    .. math::
        \tau(s) = \tau_{min} + (\tau_{max} - \tau_{min})
                  \frac{e^{r |s|} - 1}{e^{r} - 1}

    with rate :math:`r > 0`: ``tau(0) = t_min``, ``tau(+-1) = t_max``, convex in ``|s|``
    (the larger ``rate``, the longer the temperature stays near ``t_min``).
    """

    t_min: float = 0.1
    t_max: float = 0.2
    rate: float = 3.0

    def __post_init__(self) -> None:
        _check_range(self.t_min, self.t_max)
        check_positive_float("rate", self.rate)

    def __call__(self, s: Tensor) -> Tensor:
        grow = torch.expm1(self.rate * s.clamp(-1.0, 1.0).abs()) / math.expm1(self.rate)
        return self.t_min + (self.t_max - self.t_min) * grow
