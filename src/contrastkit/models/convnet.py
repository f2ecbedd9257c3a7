"""A small convolutional backbone for 8x8 to 32x32 images on CPU.

Used by the offline default (scikit-learn digits, 8x8 grey replicated to RGB). Four
``Conv3x3 -> BN -> ReLU`` blocks with channels ``width, 2*width, 4*width, out_dim`` and strides
``1, 2, 2, 1``, then global average pooling. An 8x8 input is reduced to 2x2 before pooling,
a 32x32 input to 8x8. At the defaults (width 32, out_dim 128) it has 241,184 parameters.
"""

from __future__ import annotations

import torch
from torch import nn

from contrastkit.models.batch_norm import BatchNorm2d

__all__ = ["SmallConvNet", "small_convnet"]


class SmallConvNet(nn.Module):
    """(B, in_channels, H, W) float -> (B, out_dim) features.

    Args:
        in_channels: input channels.
        width: channels of the first block (then doubled twice).
        out_dim: channels of the last block = feature size.
        batch_norm: a batch-norm layer after each convolution (False: none, and the
            convolutions get a bias instead).

    Attributes:
        out_dim: size of the output feature vector.
    """

    def __init__(self, in_channels: int = 3, width: int = 32, out_dim: int = 128,
                 batch_norm: bool = True) -> None:
        super().__init__()
        for name, value in (("in_channels", in_channels), ("width", width),
                            ("out_dim", out_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.in_channels = in_channels
        channels = (in_channels, width, 2 * width, 4 * width, out_dim)
        strides = (1, 2, 2, 1)
        blocks: list[nn.Module] = []
        for c_in, c_out, stride in zip(channels[:-1], channels[1:], strides, strict=True):
            blocks.append(nn.Conv2d(c_in, c_out, kernel_size=3, stride=stride, padding=1,
                                    bias=not batch_norm))
            if batch_norm:
                blocks.append(BatchNorm2d(c_out))
            blocks.append(nn.ReLU(inplace=True))
        self.features = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.out_dim: int = out_dim
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map images (B, in_channels, H, W) to pooled features (B, out_dim)."""
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(
                f"x must have shape (B, {self.in_channels}, H, W), got {tuple(x.shape)}"
            )
        return torch.flatten(self.pool(self.features(x)), 1)


def small_convnet(in_channels: int = 3, width: int = 32, out_dim: int = 128,
                  batch_norm: bool = True) -> SmallConvNet:
    """Small 4-block convnet for 8x8 to 32x32 inputs; see :class:`SmallConvNet`."""
    return SmallConvNet(in_channels=in_channels, width=width, out_dim=out_dim,
                        batch_norm=batch_norm)
