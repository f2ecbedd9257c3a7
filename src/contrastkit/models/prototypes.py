"""Prototype layers: the last layers that score a unit embedding against K unit vectors, SwAV's
prototypes (Caron et al. 2020) and DINO's head (Caron et al. 2021).

* SwAV: a bias-free ``nn.Linear(dim, K)`` whose rows are put back on the unit sphere before
  every step (:func:`normalize_prototypes_`; ``main_swav.py`` normalises
  ``prototypes.weight`` in place at each iteration, no gradient through the normalisation).
* DINO: :class:`DINOHead`, an MLP to a bottleneck, L2 normalisation, then a weight-normalised
  linear layer (:class:`WeightNormLinear`), whose rows' norms are fixed to 1 with
  ``norm_last_layer`` (the gradient then flows through the normalisation).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastkit.models.batch_norm import BatchNorm1d

__all__ = ["DINOHead", "WeightNormLinear", "normalize_prototypes_"]


@torch.no_grad()
def normalize_prototypes_(layer: nn.Linear) -> None:
    """Put every row of ``layer.weight`` (one prototype each) on the unit sphere, in place."""
    layer.weight.copy_(F.normalize(layer.weight, dim=1))


class WeightNormLinear(nn.Module):
    r"""Bias-free linear layer with weight normalisation over the output rows (Salimans &
    Kingma 2016): :math:`y = x W^\top`, :math:`W_k = g_k \, v_k / \lVert v_k \rVert_2`.

    What ``nn.utils.weight_norm(nn.Linear(in_dim, out_dim, bias=False))`` computes with its
    gain filled with 1, as DINO's ``DINOHead.last_layer``; ``learn_gain=False`` is DINO's
    ``norm_last_layer`` (the gain stays 1 and is no parameter).

    Args:
        in_dim: input size.
        out_dim: output size (K).
        learn_gain: train the gains :math:`g` (shape (K, 1), as weight norm's), starting at 1.

    Attributes:
        weight: the directions :math:`v` (K, in_dim), ``nn.Linear``'s initialisation.
        gain: the gains, or ``None`` when fixed to 1.
    """

    def __init__(self, in_dim: int, out_dim: int, learn_gain: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_dim, in_dim))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))  # nn.Linear's
        self.gain = nn.Parameter(torch.ones(out_dim, 1)) if learn_gain else None
        self.out_dim = out_dim

    def forward(self, x: Tensor) -> Tensor:
        weight = F.normalize(self.weight, dim=1)
        if self.gain is not None:
            weight = self.gain * weight
        return F.linear(x, weight)


class DINOHead(nn.Module):
    """DINO's projection head (Caron et al. 2021, section 3.1; facebookresearch/dino
    ``DINOHead``): ``num_layers`` linear layers ``in_dim -> hidden_dim -> ... -> bottleneck_dim``
    with GELU between them (and BN after each hidden one with ``batch_norm``), L2 normalisation,
    then :class:`WeightNormLinear` ``bottleneck_dim -> num_prototypes``.

    The MLP's weights start from a normal of std 0.02 truncated at +-2 and its biases at 0, as
    the official code's; the last layer from ``nn.Linear``'s initialisation.

    Args:
        in_dim: backbone feature size.
        hidden_dim: hidden size (2048 in DINO).
        bottleneck_dim: size before the last layer (256 in DINO).
        num_prototypes: K, the output size (65,536 in DINO, 4,096 in solo-learn's CIFAR).
        num_layers: linear layers of the MLP (3 in DINO; 1: a single linear layer).
        batch_norm: BN after each hidden layer (``--use_bn_in_head``, off in DINO).
        norm_last_layer: fix the last layer's row norms to 1 (DINO's default).

    Attributes:
        mlp: the MLP (``nn.Sequential``).
        last_layer: the :class:`WeightNormLinear`.
        out_dim: ``num_prototypes``.
    """

    def __init__(self, in_dim: int, hidden_dim: int = 2048, bottleneck_dim: int = 256,
                 num_prototypes: int = 65536, num_layers: int = 3, batch_norm: bool = False,
                 norm_last_layer: bool = True) -> None:
        super().__init__()
        for name, value in (("in_dim", in_dim), ("hidden_dim", hidden_dim),
                            ("bottleneck_dim", bottleneck_dim),
                            ("num_prototypes", num_prototypes), ("num_layers", num_layers)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        layers: list[nn.Module] = []
        dim = in_dim
        for _ in range(num_layers - 1):
            layers.append(nn.Linear(dim, hidden_dim))
            if batch_norm:
                layers.append(BatchNorm1d(hidden_dim))
            layers.append(nn.GELU())
            dim = hidden_dim
        layers.append(nn.Linear(dim, bottleneck_dim))
        self.mlp = nn.Sequential(*layers)
        for layer in self.mlp:
            if isinstance(layer, nn.Linear):
                nn.init.trunc_normal_(layer.weight, std=0.02)
                nn.init.zeros_(layer.bias)
        self.last_layer = WeightNormLinear(bottleneck_dim, num_prototypes,
                                           learn_gain=not norm_last_layer)
        self.out_dim = num_prototypes

    def forward(self, x: Tensor) -> Tensor:
        """Features (B, in_dim) -> outputs (B, num_prototypes)."""
        return self.last_layer(F.normalize(self.mlp(x), dim=1))
