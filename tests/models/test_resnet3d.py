"""ResNet3D-18/50 slow pathway (SCE Table 23)."""

import pytest
import torch
from torch import nn

from contrastkit.models import resnet3d_18, resnet3d_50


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_param_counts_and_out_dim() -> None:
    # 2D counterparts (torchvision totals minus fc) plus the two extra temporal taps of the
    # first conv of every res4/res5 block (weights in * out * k * k per tap).
    extra_18 = 2 * (128 * 256 * 9 + 256 * 256 * 9 + 256 * 512 * 9 + 512 * 512 * 9)
    r3d18 = resnet3d_18()
    assert n_params(r3d18) == 11_176_512 + extra_18 == 20_023_872
    assert r3d18.out_dim == 512
    extra_50 = 2 * (512 * 256 + 5 * 1024 * 256 + 1024 * 512 + 2 * 2048 * 512)
    r3d50 = resnet3d_50()
    assert n_params(r3d50) == 23_508_032 + extra_50 == 31_634_496
    assert r3d50.out_dim == 2048


@pytest.mark.parametrize(("factory", "out_dim"), [(resnet3d_18, 128), (resnet3d_50, 512)])
def test_output_shape_and_time_preserved(factory, out_dim: int) -> None:
    net = factory(width=16)  # out_dim = 8 * width * expansion
    seen = {}
    net.layer4.register_forward_hook(lambda m, inp, out: seen.update(out=out.shape))
    out = net(torch.randn(2, 3, 4, 32, 32))
    assert out.shape == (2, out_dim) and net.out_dim == out_dim
    assert seen["out"] == (2, out_dim, 4, 1, 1)  # T kept, space /32


@pytest.mark.parametrize(
    ("factory", "blocks"), [(resnet3d_18, (2, 2, 2, 2)), (resnet3d_50, (3, 4, 6, 3))]
)
def test_temporal_kernels_follow_table23(factory, blocks) -> None:
    net = factory(width=4)
    temporal = {
        name for name, m in net.named_modules()
        if isinstance(m, nn.Conv3d) and m.kernel_size[0] == 3
    }
    expected = {f"layer{s}.{b}.conv1" for s in (3, 4) for b in range(blocks[s - 1])}
    assert temporal == expected
    for m in net.modules():
        if isinstance(m, nn.Conv3d):
            assert m.stride[0] == 1  # no temporal downsampling
            assert m.kernel_size[0] in (1, 3)
    assert net.conv1.kernel_size == (1, 7, 7) and net.conv1.stride == (1, 2, 2)
    assert net.maxpool.kernel_size == (1, 3, 3) and net.maxpool.stride == (1, 2, 2)


def test_bottleneck_spatial_kernels() -> None:
    block = resnet3d_50(width=4).layer3[0]
    assert block.conv1.kernel_size == (3, 1, 1)
    assert block.conv2.kernel_size == (1, 3, 3) and block.conv2.stride == (1, 2, 2)
    assert block.conv3.kernel_size == (1, 1, 1)


def test_bad_input_shape() -> None:
    with pytest.raises(ValueError, match="x must have shape"):
        resnet3d_18(width=4)(torch.randn(2, 3, 32, 32))
