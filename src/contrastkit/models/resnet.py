"""ResNet-18/34/50 backbones (He et al., 2016) with the SCE CIFAR stem option.

Written from the architecture description of "Deep Residual Learning for Image Recognition"
(He et al., CVPR 2016, Table 1) with the common "v1.5" placement of the stride in the 3x3
convolution of bottleneck blocks. Module names follow the torchvision ResNet key layout
(``conv1``, ``bn1``, ``layer1.0.conv1``, ``layer2.0.downsample.0``, ...) so that
:mod:`contrastkit.models.torchvision_layout` maps state dicts by identity.

The backbone has no classifier: ``forward`` returns globally average-pooled features of size
``out_dim`` (512 for ResNet-18/34, 2048 for ResNet-50 at the default ``width=64``).

SCE appendix D.1 ("Architecture change for small and medium datasets"): for 32x32 to 96x96
images the first 7x7 stride-2 convolution is replaced by a 3x3 stride-1 convolution and the
first max-pool is removed (``cifar_stem=True``).

Parameter counts at ``width=64`` (no classifier), equal to torchvision's figures minus ``fc``:
ResNet-18 11,176,512; ResNet-34 21,284,672; ResNet-50 23,508,032. The CIFAR stem replaces the
9,408 weights of the 7x7 stem convolution by 1,728, e.g. ResNet-18 CIFAR has 11,168,832.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from contrastkit.models.batch_norm import BatchNorm2d

__all__ = ["BasicBlock", "Bottleneck", "ResNet", "resnet18", "resnet34", "resnet50"]


def _conv3x3(in_ch: int, out_ch: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_ch, out_ch, kernel_size=3, stride=stride, padding=1, bias=False)


def _conv1x1(in_ch: int, out_ch: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_ch, out_ch, kernel_size=1, stride=stride, bias=False)


def _downsample(in_ch: int, out_ch: int, stride: int) -> nn.Sequential | None:
    """Projection shortcut (He et al., 2016, option B): 1x1 conv + BN when shapes change."""
    if stride == 1 and in_ch == out_ch:
        return None
    return nn.Sequential(_conv1x1(in_ch, out_ch, stride), BatchNorm2d(out_ch))


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with an identity or projection shortcut (ResNet-18/34).

    ``y = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))``; the stride is on ``conv1``.
    """

    expansion = 1

    def __init__(self, in_ch: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = _conv3x3(in_ch, planes, stride)
        self.bn1 = BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = BatchNorm2d(planes)
        self.downsample = _downsample(in_ch, planes, stride)

    @property
    def last_bn(self) -> nn.BatchNorm2d:
        """The BN closing the residual branch (zeroed by ``zero_init_residual``)."""
        return self.bn2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3, 1x1 expand (x4) convolutions with a shortcut (ResNet-50).

    The stride is on the 3x3 convolution ``conv2`` ("ResNet v1.5", as in torchvision).
    """

    expansion = 4

    def __init__(self, in_ch: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out_ch = planes * self.expansion
        self.conv1 = _conv1x1(in_ch, planes)
        self.bn1 = BatchNorm2d(planes)
        self.conv2 = _conv3x3(planes, planes, stride)
        self.bn2 = BatchNorm2d(planes)
        self.conv3 = _conv1x1(planes, out_ch)
        self.bn3 = BatchNorm2d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _downsample(in_ch, out_ch, stride)

    @property
    def last_bn(self) -> nn.BatchNorm2d:
        """The BN closing the residual branch (zeroed by ``zero_init_residual``)."""
        return self.bn3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """ResNet backbone without classifier: (B, 3, H, W) float -> (B, out_dim) features.

    Args:
        block: ``BasicBlock`` or ``Bottleneck``.
        layers: number of blocks in each of the four stages, e.g. ``(2, 2, 2, 2)``.
        cifar_stem: use the SCE appendix D.1 stem (3x3 conv stride 1, no max-pool) instead of
            the ImageNet stem (7x7 conv stride 2 + 3x3 max-pool stride 2).
        width: base width; stage ``i`` has ``width * 2**i`` planes (64 = standard ResNet).
            ``out_dim = 8 * width * block.expansion``.
        zero_init_residual: initialise the gamma of the last BN of every residual branch to
            zero, so each block starts as the identity (Goyal et al., 2017).

    Attributes:
        out_dim: size of the output feature vector.
    """

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        layers: Sequence[int],
        *,
        cifar_stem: bool = False,
        width: int = 64,
        zero_init_residual: bool = False,
    ) -> None:
        super().__init__()
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be a positive int, got {width!r}")
        if len(layers) != 4 or any(int(n) < 1 for n in layers):
            raise ValueError(f"layers must be four positive block counts, got {layers!r}")
        self.cifar_stem = cifar_stem
        if cifar_stem:
            self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
        else:
            self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = (
            nn.Identity() if cifar_stem else nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        )
        in_ch = width
        stages = []
        for i, n_blocks in enumerate(layers):
            planes = width * 2**i
            stride = 1 if i == 0 else 2
            blocks = [block(in_ch, planes, stride)]
            in_ch = planes * block.expansion
            blocks += [block(in_ch, planes) for _ in range(int(n_blocks) - 1)]
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.out_dim: int = in_ch
        self._init_weights(zero_init_residual)

    def _init_weights(self, zero_init_residual: bool) -> None:
        """He (fan_out) normal init for convs; BN gamma 1, beta 0 (He et al., 2015)."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock | Bottleneck):
                    nn.init.zeros_(m.last_bn.weight)

    def forward_stem(self, x: torch.Tensor) -> torch.Tensor:
        """Stem only: the input of ``layer1``."""
        if x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(f"x must have shape (B, 3, H, W), got {tuple(x.shape)}")
        return self.maxpool(self.relu(self.bn1(self.conv1(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map images (B, 3, H, W) to pooled features (B, out_dim)."""
        x = self.forward_stem(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return torch.flatten(self.avgpool(x), 1)


def resnet18(
    cifar_stem: bool = False, width: int = 64, zero_init_residual: bool = False
) -> ResNet:
    """ResNet-18 backbone (BasicBlock, 2-2-2-2); out_dim 512 at width 64, 11,176,512 params."""
    return ResNet(
        BasicBlock, (2, 2, 2, 2),
        cifar_stem=cifar_stem, width=width, zero_init_residual=zero_init_residual,
    )


def resnet34(
    cifar_stem: bool = False, width: int = 64, zero_init_residual: bool = False
) -> ResNet:
    """ResNet-34 backbone (BasicBlock, 3-4-6-3); out_dim 512 at width 64, 21,284,672 params."""
    return ResNet(
        BasicBlock, (3, 4, 6, 3),
        cifar_stem=cifar_stem, width=width, zero_init_residual=zero_init_residual,
    )


def resnet50(
    cifar_stem: bool = False, width: int = 64, zero_init_residual: bool = False
) -> ResNet:
    """ResNet-50 backbone (Bottleneck, 3-4-6-3); out_dim 2048 at width 64, 23,508,032 params."""
    return ResNet(
        Bottleneck, (3, 4, 6, 3),
        cifar_stem=cifar_stem, width=width, zero_init_residual=zero_init_residual,
    )
