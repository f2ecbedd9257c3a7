"""Projector and predictor MLP heads with the options of SCE Tables 21 and 24.

SCE (Denize et al.) Table 21 (image pretraining) and Table 24 (video pretraining) describe a
head by its number of linear layers, hidden and output dimension and a batch-norm option:

* ``"none"`` ("no"): no batch normalization;
* ``"hidden"`` ("hid"): BN after each hidden linear layer;
* ``"all"``: BN after each hidden linear layer and after the output layer.

A head with ``L`` layers is ``L - 1`` hidden blocks ``Linear -> [BN] -> ReLU`` followed by an
output ``Linear -> [BN]``. Choices (documented, tested):

* a linear layer directly followed by BN has no bias (BN's shift makes it redundant);
* the output BN has ``affine=False`` (no learned scale/shift), as in MoCo v3 / SimSiam, whose
  heads SCE reuses for ImageNet (appendix D.2);
* ``last_bias=None`` means "bias unless an output BN follows"; pass a bool to force it.

Rows of the tables (layers, hidden, out, BN):

* Table 21 projector: R-18 CIFAR/STL10/Tiny-IN (2, 512, 128, hid); R-50 IN100
  (2, 4096, 256, no); R-50 IN1k (3, 2048, 256, all).
* Table 24 projector/predictor: R3D-18 K200/K400 projector (3, 1024, 256, all), predictor
  (2, 1024, 256, hid); R3D-50 K400 projector (3, 4096, 256, all), predictor (2, 4096, 256, hid).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from contrastkit.models.batch_norm import BatchNorm1d

__all__ = ["BatchNormOption", "MLPHead", "predictor", "projector"]

BatchNormOption = Literal["none", "hidden", "all"]
_BN_OPTIONS = ("none", "hidden", "all")


class MLPHead(nn.Module):
    """MLP projector/predictor: (B, in_dim) -> (B, out_dim).

    Args:
        in_dim: input feature size (e.g. backbone ``out_dim``).
        hidden_dim: size of every hidden layer.
        out_dim: output size.
        num_layers: number of linear layers (>= 1; SCE uses 2 or 3).
        batch_norm: ``"none"``, ``"hidden"`` or ``"all"`` (SCE Tables 21/24, see module doc).
        last_bias: bias of the output linear layer; ``None`` = bias unless an output BN follows.

    Attributes:
        layers: the ``nn.Sequential`` of linear, BN and ReLU modules in order.
        out_dim: output size.
    """

    def __init__(
        self,
        in_dim: int,
        hidden_dim: int,
        out_dim: int,
        num_layers: int = 2,
        batch_norm: BatchNormOption = "hidden",
        last_bias: bool | None = None,
    ) -> None:
        super().__init__()
        for name, value in (("in_dim", in_dim), ("hidden_dim", hidden_dim),
                            ("out_dim", out_dim), ("num_layers", num_layers)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if batch_norm not in _BN_OPTIONS:
            raise ValueError(f"batch_norm must be one of {_BN_OPTIONS}, got {batch_norm!r}")
        hidden_bn = batch_norm in ("hidden", "all")
        output_bn = batch_norm == "all"
        modules: list[nn.Module] = []
        dim = in_dim
        for _ in range(num_layers - 1):
            modules.append(nn.Linear(dim, hidden_dim, bias=not hidden_bn))
            if hidden_bn:
                modules.append(BatchNorm1d(hidden_dim))
            modules.append(nn.ReLU(inplace=True))
            dim = hidden_dim
        bias = (not output_bn) if last_bias is None else bool(last_bias)
        modules.append(nn.Linear(dim, out_dim, bias=bias))
        if output_bn:
            modules.append(BatchNorm1d(out_dim, affine=False))
        self.layers = nn.Sequential(*modules)
        self.out_dim: int = out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the head to features (B, in_dim)."""
        if x.ndim != 2:
            raise ValueError(f"x must have shape (B, in_dim), got {tuple(x.shape)}")
        return self.layers(x)


def projector(
    in_dim: int,
    hidden_dim: int = 512,
    out_dim: int = 128,
    num_layers: int = 2,
    batch_norm: BatchNormOption = "hidden",
    last_bias: bool | None = None,
) -> MLPHead:
    """Projector g (SCE Fig. 1). Defaults: SCE Table 21 R-18 CIFAR row (2, 512, 128, hid).

    ImageNet (Table 21): ``projector(2048, 2048, 256, 3, "all")``; video (Table 24):
    ``projector(512, 1024, 256, 3, "all")`` for R3D-18.
    """
    return MLPHead(in_dim, hidden_dim, out_dim, num_layers, batch_norm, last_bias)


def predictor(
    in_dim: int = 256,
    hidden_dim: int = 4096,
    out_dim: int = 256,
    num_layers: int = 2,
    batch_norm: BatchNormOption = "hidden",
    last_bias: bool | None = None,
) -> MLPHead:
    """Predictor h (SCE Fig. 1). Defaults: SCE Table 24 R3D-50 row (2, 4096, 256, hid).

    R3D-18 (Table 24): ``predictor(256, 1024, 256, 2, "hidden")``.
    """
    return MLPHead(in_dim, hidden_dim, out_dim, num_layers, batch_norm, last_bias)
