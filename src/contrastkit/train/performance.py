"""Memory layout and compilation of the training step (:class:`~.specs.PerformanceSpec`).

Neither changes what is computed: a channels-last tensor holds the same values in another
order, and ``torch.compile`` traces the same operations (its fused kernels round in the same
float precision; the test suite checks losses and gradients of both paths against the eager,
contiguous one).
"""

from __future__ import annotations

import torch
from torch import nn

from contrastkit.train.specs import PerformanceSpec

__all__ = ["compile_encoders", "use_channels_last"]


def use_channels_last(spec: PerformanceSpec, device: torch.device, images: bool) -> bool:
    """Whether the step runs channels-last: 2-D (image) backbones only; ``None`` means CUDA."""
    if not images:
        return False
    return device.type == "cuda" if spec.channels_last is None else spec.channels_last


def compile_encoders(method: nn.Module, mode: str = "default") -> list[str]:
    """``torch.compile`` the method's encoders in place; return the names compiled.

    The online backbone, projector and predictor, and the momentum target's copy, each with
    ``nn.Module.compile`` so that ``state_dict`` keys stay as they are. The losses are not
    compiled: they are custom autograd functions already fused by hand.
    """
    names = []
    for name in ("backbone", "projector", "predictor"):
        module = getattr(method, name, None)
        if isinstance(module, nn.Module):
            module.compile(mode=mode)
            names.append(name)
    target = getattr(method, "target", None)
    if target is not None and isinstance(getattr(target, "target", None), nn.Module):
        target.target.compile(mode=mode)
        names.append("target")
    return names
