"""Temperature choices: per-pair functions of the cosine similarity (Manna et al. 2023,
DySTreSS) and, beside them, the temperature schedules of Kukleva et al. 2023 and MACL.

The ``temperature`` of a contrastive loss or of a pretraining method is a :data:`Temperature`,
one of:

* a float > 0, the same for every pair and every step;
* a :class:`SimilarityTemperature`: a function mapping a tensor of cosine similarities ``s`` in
  [-1, 1] to a tensor of the same shape of temperatures > 0 (DySTreSS and the other functions
  below), or a :class:`PairTemperature` with one temperature for positive and one for negative
  pairs. The losses of :mod:`contrastkit.losses.infonce` and
  :mod:`contrastkit.losses.hard_contrastive` evaluate it on *detached* similarities (the
  temperature is a per-pair constant for the gradient, as in DySTreSS Alg. 3 where ``temp`` is
  computed from ``s.detach()``) and divide every logit by it, the positive's included;
* a :class:`~contrastkit.schedules.Schedule` of the training state:
  :class:`KuklevaCosineTemperature`, :class:`MACLTemperature` (alignment-adaptive) or a generic
  schedule of :mod:`contrastkit.schedules`. A method evaluates it at each step with
  :func:`resolve_temperature` and hands the loss its value.

Every similarity function here clamps ``s`` to [-1, 1] first, so rounding that pushes a cosine a
hair past 1 cannot move the temperature outside [t_min, t_max].
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from contrastkit.checks import check_positive_float, check_temperature_value
from contrastkit.schedules import Schedule, ScheduleState

__all__ = [
    "DySTreSSTemperature",
    "ExponentialTemperature",
    "KuklevaCosineTemperature",
    "LinearTemperature",
    "MACLTemperature",
    "MonotonicCosineTemperature",
    "PairTemperature",
    "SimilarityTemperature",
    "Temperature",
    "check_temperature",
    "resolve_temperature",
]


class SimilarityTemperature(ABC):
    """Base of the per-pair temperatures: cosine similarities -> temperatures > 0, same shape.

    A config names one by its ``class_path`` (which a saved config keeps); in Python any
    callable with this contract is accepted by the losses as well.
    """

    @abstractmethod
    def __call__(self, s: Tensor) -> Tensor:
        """Temperatures of the pairs whose cosine similarities are ``s``."""


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


#: What a ``temperature`` may be, in a loss or a method (see the module docstring). A loss takes
#: the first three (and a 0-d tensor, a schedule's value on the device); a method also takes a
#: schedule, which it evaluates at each step.
Temperature = float | SimilarityTemperature | PairTemperature | Schedule


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
    check_temperature_value(name, temperature)  # type: ignore[arg-type]


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
            schedules (:class:`MACLTemperature`); detached here.

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
