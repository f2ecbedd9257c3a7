"""ResNet-18/34/50 backbones: shapes, parameter counts, CIFAR stem, zero-init residual."""

import pytest
import torch
from torch import nn

from contrastkit.models import resnet18, resnet34, resnet50

# torchvision's published totals include fc = Linear(out_dim, 1000).
TORCHVISION_TOTAL = {"resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032}
FACTORIES = {"resnet18": resnet18, "resnet34": resnet34, "resnet50": resnet50}
OUT_DIM = {"resnet18": 512, "resnet34": 512, "resnet50": 2048}


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.fixture(scope="module")
def full_width() -> dict[str, nn.Module]:
    """Full-width (64) ImageNet-stem backbones, built once (init dominates the cost)."""
    return {name: factory() for name, factory in FACTORIES.items()}


@pytest.mark.parametrize("name", list(FACTORIES))
def test_param_count_matches_torchvision(name: str, full_width) -> None:
    net = full_width[name]
    fc = OUT_DIM[name] * 1000 + 1000
    assert n_params(net) == TORCHVISION_TOTAL[name] - fc
    assert net.out_dim == OUT_DIM[name]


def test_param_count_without_fc_figures(full_width) -> None:
    assert n_params(full_width["resnet18"]) == 11_176_512
    assert n_params(full_width["resnet50"]) == 23_508_032


def test_cifar_stem_param_count() -> None:
    # 7x7x3x64 stem weights replaced by 3x3x3x64.
    assert n_params(resnet18(cifar_stem=True)) == 11_176_512 - 7 * 7 * 3 * 64 + 3 * 3 * 3 * 64


@pytest.mark.parametrize("name", list(FACTORIES))
@pytest.mark.parametrize("cifar_stem", [False, True])
def test_output_shape(name: str, cifar_stem: bool) -> None:
    net = FACTORIES[name](cifar_stem=cifar_stem, width=8)
    out = net(torch.randn(2, 3, 32, 32))
    assert out.shape == (2, OUT_DIM[name] // 8)
    assert net.out_dim == OUT_DIM[name] // 8


@pytest.mark.parametrize("name", list(FACTORIES))
def test_full_width_output_shape(name: str, full_width) -> None:
    net = full_width[name].eval()
    assert net(torch.randn(1, 3, 32, 32)).shape == (1, OUT_DIM[name])


def test_cifar_stem_keeps_spatial_size() -> None:
    x = torch.randn(2, 3, 32, 32)
    cifar = resnet18(cifar_stem=True, width=8)
    assert cifar.forward_stem(x).shape == (2, 8, 32, 32)
    assert cifar.conv1.kernel_size == (3, 3) and cifar.conv1.stride == (1, 1)
    assert not any(isinstance(m, nn.MaxPool2d) for m in cifar.modules())
    imagenet = resnet18(width=8)
    assert imagenet.forward_stem(x).shape == (2, 8, 8, 8)
    assert imagenet.conv1.kernel_size == (7, 7) and imagenet.conv1.stride == (2, 2)


def test_cifar_stem_layer1_input_via_hook() -> None:
    net = resnet34(cifar_stem=True, width=8)
    seen = {}
    net.layer1.register_forward_hook(lambda m, inp, out: seen.update(inp=inp[0].shape))
    net(torch.randn(2, 3, 24, 24))
    assert seen["inp"][-2:] == (24, 24)


@pytest.mark.parametrize(("factory", "last_bn"), [(resnet18, "bn2"), (resnet50, "bn3")])
def test_zero_init_residual(factory, last_bn: str) -> None:
    net = factory(width=8, zero_init_residual=True)
    n_blocks = 0
    for stage in (net.layer1, net.layer2, net.layer3, net.layer4):
        for block in stage:
            n_blocks += 1
            assert torch.count_nonzero(getattr(block, last_bn).weight) == 0
            assert torch.all(block.bn1.weight == 1)
    assert n_blocks == (8 if factory is resnet18 else 16)
    assert torch.all(net.bn1.weight == 1)
    default = factory(width=8)
    assert torch.all(getattr(default.layer1[0], last_bn).weight == 1)


def test_zero_init_residual_blocks_start_as_identity_plus_relu() -> None:
    net = resnet18(width=8, zero_init_residual=True).eval()
    block = net.layer1[1]  # identity shortcut
    x = torch.randn(2, 8, 6, 6)
    torch.testing.assert_close(block(x), torch.relu(x))


@pytest.mark.parametrize("width", [0, -1, 2.5, True])
def test_bad_width(width) -> None:
    with pytest.raises(ValueError, match="width"):
        resnet18(width=width)


def test_bad_input_shape() -> None:
    with pytest.raises(ValueError, match="x must have shape"):
        resnet18(width=8)(torch.randn(2, 1, 16, 16))
