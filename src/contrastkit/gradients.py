"""What happens to the gradients between the backward pass and the optimiser step: clipping each
parameter's gradient norm on its own, and dropping the gradients of a layer frozen for the first
steps or epochs of training.

Both are what the official codes of DINO (Caron et al. 2021, ``utils.clip_gradients`` and
``utils.cancel_gradients_last_layer`` of facebookresearch/dino) and SwAV (Caron et al. 2020,
``main_swav.py``: the prototypes' gradients cancelled for ``freeze_prototypes_niters``
iterations) do after ``loss.backward()`` and before ``optimizer.step()``. The pretraining engine
applies them once per optimiser step (after every accumulated micro-batch, after a mixed
precision loss scale is removed), to the method's parameters only (not to the online linear
classifier of the monitors).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from contrastkit.checks import check_positive_float
from contrastkit.precision import compute_dtype
from contrastkit.schedules import ScheduleState

__all__ = ["GradientFreeze", "clip_grad_norm_per_parameter_", "drop_frozen_gradients"]

#: Added to each gradient norm before dividing, as DINO's ``clip_gradients`` does.
CLIP_EPS = 1e-6


def clip_grad_norm_per_parameter_(parameters: Iterable[Tensor], max_norm: float) -> None:
    """Clip each parameter's gradient to L2 norm ``max_norm`` on its own, in place.

    For every parameter with a gradient ``g``: ``g <- g * min(1, max_norm / (||g||_2 + 1e-6))``
    (DINO, facebookresearch/dino ``utils.clip_gradients``). Unlike
    ``torch.nn.utils.clip_grad_norm_`` (and Lightning's ``trainer.gradient_clip_val``), which
    scale all gradients by one factor computed from their joint norm, a large gradient of one
    tensor does not shrink the others. Multi-tensor operations, no value read on the host.

    Raises:
        ValueError: unless ``max_norm`` is a finite number > 0.
    """
    check_positive_float("max_norm", max_norm)
    grads: dict[tuple[torch.device, torch.dtype], list[Tensor]] = {}
    for p in parameters:
        if p.grad is not None:
            grads.setdefault((p.grad.device, p.grad.dtype), []).append(p.grad)
    for same in grads.values():
        norms = torch.stack(torch._foreach_norm(same)).to(compute_dtype(same[0].dtype))
        factors = (max_norm / (norms + CLIP_EPS)).clamp_(max=1.0).to(same[0].dtype)
        torch._foreach_mul_(same, list(factors.unbind(0)))


@dataclass(frozen=True)
class GradientFreeze:
    """How long a layer is kept fixed from the start of training: its gradients are dropped
    (set to ``None``, so the optimiser applies no update, no weight decay and no momentum to it)
    while ``step < until`` (``unit: step``, optimiser steps already taken) or
    ``epoch < until`` (``unit: epoch``, epochs elapsed).

    DINO keeps its last layer fixed for the first epoch (``--freeze_last_layer 1``); SwAV its
    prototypes for the first 313 iterations (``--freeze_prototypes_niters``, 5,005 in its
    batch-256 script), solo-learn for the first epochs.

    Attributes:
        until: the step or epoch from which the layer trains (0: never frozen).
        unit: ``step`` or ``epoch``.
    """

    until: float = 0
    unit: Literal["step", "epoch"] = "step"

    def __post_init__(self) -> None:
        if isinstance(self.until, bool) or not isinstance(self.until, (int, float)) or not (
                math.isfinite(self.until) and self.until >= 0):
            raise ValueError(f"until must be a finite number >= 0, got {self.until!r}")
        if self.unit not in ("step", "epoch"):
            raise ValueError(f"unit must be 'step' or 'epoch', got {self.unit!r}")

    def active(self, state: ScheduleState) -> bool:
        """Whether the layer is still fixed at ``state``."""
        return (state.step if self.unit == "step" else state.epoch) < self.until


def drop_frozen_gradients(module: nn.Module, freezes: Mapping[str, GradientFreeze],
                          state: ScheduleState) -> None:
    """Set to ``None`` the gradient of every parameter of ``module`` under a name in
    ``freezes`` (a submodule's name, e.g. ``prototypes``, or a parameter's) whose freeze is
    active at ``state``.

    Raises:
        ValueError: for a name in ``freezes`` that names no parameter of ``module``.
    """
    for prefix, freeze in freezes.items():
        if not freeze.active(state):
            continue
        params = [p for name, p in module.named_parameters()
                  if name == prefix or name.startswith(prefix + ".")]
        if not params:
            raise ValueError(f"gradient freeze {prefix!r} names no parameter of "
                             f"{type(module).__name__}")
        for p in params:
            p.grad = None
