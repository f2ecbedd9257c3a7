"""ResNet3D-18 and ResNet3D-50: the Slow pathway of SlowFast as given by SCE Table 23.

SCE (Denize et al.) appendix D.3 uses ResNet3D networks (Hara et al., 2018) following the
Slow path of SlowFast (Feichtenhofer et al., 2019). Table 23, kernel ``T x S^2, channels``:

=====  =============================================  =============================================
stage  ResNet3D-18                                    ResNet3D-50
=====  =============================================  =============================================
conv1  1x7^2, 64, stride 1, 2^2                       1x7^2, 64, stride 1, 2^2
pool1  1x3^2 max, stride 1, 2^2                       1x3^2 max, stride 1, 2^2
res2   [1x3^2, 64; 1x3^2, 64] x2                      [1x1^2, 64; 1x3^2, 64; 1x1^2, 256] x3
res3   [1x3^2, 128; 1x3^2, 128] x2                    [1x1^2, 128; 1x3^2, 128; 1x1^2, 512] x4
res4   [3x3^2, 256; 1x3^2, 256] x2                    [3x1^2, 256; 1x3^2, 256; 1x1^2, 1024] x6
res5   [3x3^2, 512; 1x3^2, 512] x2                    [3x1^2, 512; 1x3^2, 512; 1x1^2, 2048] x3
pool   global average                                 global average
=====  =============================================  =============================================

So the temporal kernel 3 is only in the *first* convolution of every block of res4 and res5
(both blocks of a stage, all blocks for R3D-50), with temporal padding 1. There is no temporal
stride anywhere: T is preserved until the global pool. Choices where the table is silent,
following SlowFast and the 2D ResNet of :mod:`contrastkit.models.resnet`: spatial stride 2 at
the first block of res3, res4, res5, on the first conv (basic) or the 1x3^2 conv (bottleneck);
projection shortcut ``Conv 1x1^2 stride (1, 2, 2) + BN`` when shapes change; no conv bias.

Parameter counts (``width=64``, no classifier), computed from these rules and asserted in
tests: ResNet3D-18 20,023,872 = ResNet-18's 11,176,512 + 8,847,360 for the temporal taps of
res4/res5 first convs; ResNet3D-50 31,634,496 = ResNet-50's 23,508,032 + 8,126,464, i.e. the
"about 32M" of the SlowFast Slow-only R50 backbone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from contrastkit.models.batch_norm import BatchNorm3d

__all__ = ["BasicBlock3D", "Bottleneck3D", "ResNet3D", "resnet3d_18", "resnet3d_50"]


def _conv3d(in_ch: int, out_ch: int, t: int, s: int, stride: int = 1) -> nn.Conv3d:
    """Conv with kernel (t, s, s), stride (1, stride, stride), 'same' padding."""
    return nn.Conv3d(
        in_ch, out_ch, kernel_size=(t, s, s), stride=(1, stride, stride),
        padding=(t // 2, s // 2, s // 2), bias=False,
    )


def _downsample3d(in_ch: int, out_ch: int, stride: int) -> nn.Sequential | None:
    if stride == 1 and in_ch == out_ch:
        return None
    return nn.Sequential(_conv3d(in_ch, out_ch, 1, 1, stride), BatchNorm3d(out_ch))


class BasicBlock3D(nn.Module):
    """[t x 3^2, planes; 1 x 3^2, planes] with a shortcut (ResNet3D-18)."""

    expansion = 1

    def __init__(self, in_ch: int, planes: int, stride: int = 1, temporal: int = 1) -> None:
        super().__init__()
        self.conv1 = _conv3d(in_ch, planes, temporal, 3, stride)
        self.bn1 = BatchNorm3d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3d(planes, planes, 1, 3)
        self.bn2 = BatchNorm3d(planes)
        self.downsample = _downsample3d(in_ch, planes, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck3D(nn.Module):
    """[t x 1^2, planes; 1 x 3^2, planes; 1 x 1^2, 4 planes] with a shortcut (ResNet3D-50)."""

    expansion = 4

    def __init__(self, in_ch: int, planes: int, stride: int = 1, temporal: int = 1) -> None:
        super().__init__()
        out_ch = planes * self.expansion
        self.conv1 = _conv3d(in_ch, planes, temporal, 1)
        self.bn1 = BatchNorm3d(planes)
        self.conv2 = _conv3d(planes, planes, 1, 3, stride)
        self.bn2 = BatchNorm3d(planes)
        self.conv3 = _conv3d(planes, out_ch, 1, 1)
        self.bn3 = BatchNorm3d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _downsample3d(in_ch, out_ch, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet3D(nn.Module):
    """Slow-pathway ResNet3D backbone: (B, 3, T, H, W) float -> (B, out_dim) features.

    Args:
        block: ``BasicBlock3D`` or ``Bottleneck3D``.
        layers: blocks per stage res2..res5.
        temporal_kernels: temporal kernel of the first conv of the blocks of each stage
            (SCE Table 23: ``(1, 1, 3, 3)``).
        width: base width; stage ``i`` has ``width * 2**i`` planes (64 = Table 23).

    Attributes:
        out_dim: size of the output feature vector (512 for R3D-18, 2048 for R3D-50).
    """

    def __init__(
        self,
        block: type[BasicBlock3D] | type[Bottleneck3D],
        layers: Sequence[int],
        temporal_kernels: Sequence[int] = (1, 1, 3, 3),
        width: int = 64,
    ) -> None:
        super().__init__()
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be a positive int, got {width!r}")
        if len(layers) != 4 or len(temporal_kernels) != 4:
            raise ValueError("layers and temporal_kernels must each have 4 entries")
        if any(t < 1 or t % 2 == 0 for t in temporal_kernels):
            raise ValueError(f"temporal_kernels must be odd and >= 1, got {temporal_kernels!r}")
        self.conv1 = nn.Conv3d(
            3, width, kernel_size=(1, 7, 7), stride=(1, 2, 2), padding=(0, 3, 3), bias=False
        )
        self.bn1 = BatchNorm3d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool3d(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1))
        in_ch = width
        stages = []
        for i, (n_blocks, t) in enumerate(zip(layers, temporal_kernels, strict=True)):
            planes = width * 2**i
            stride = 1 if i == 0 else 2
            blocks = [block(in_ch, planes, stride, t)]
            in_ch = planes * block.expansion
            blocks += [block(in_ch, planes, 1, t) for _ in range(int(n_blocks) - 1)]
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool3d(1)
        self.out_dim: int = in_ch
        for m in self.modules():
            if isinstance(m, nn.Conv3d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map clips (B, 3, T, H, W) to pooled features (B, out_dim)."""
        if x.ndim != 5 or x.shape[1] != 3:
            raise ValueError(f"x must have shape (B, 3, T, H, W), got {tuple(x.shape)}")
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return torch.flatten(self.avgpool(x), 1)


def resnet3d_18(width: int = 64) -> ResNet3D:
    """ResNet3D-18 slow path (SCE Table 23): out_dim 512, 20,023,872 parameters."""
    return ResNet3D(BasicBlock3D, (2, 2, 2, 2), (1, 1, 3, 3), width=width)


def resnet3d_50(width: int = 64) -> ResNet3D:
    """ResNet3D-50 slow path (SCE Table 23): out_dim 2048, 31,634,496 parameters."""
    return ResNet3D(Bottleneck3D, (3, 4, 6, 3), (1, 1, 3, 3), width=width)
