"""Small CPU convnet."""

import pytest
import torch

from contrastkit.models import small_convnet


@pytest.mark.parametrize("size", [8, 16, 32])
def test_output_shape(size: int) -> None:
    net = small_convnet()
    assert net(torch.randn(2, 3, size, size)).shape == (2, 128)
    assert net.out_dim == 128


def test_options_and_param_count() -> None:
    net = small_convnet(in_channels=1, width=8, out_dim=20)
    assert net(torch.randn(2, 1, 8, 8)).shape == (2, 20)
    convs = 1 * 8 * 9 + 8 * 16 * 9 + 16 * 32 * 9 + 32 * 20 * 9
    bns = 2 * (8 + 16 + 32 + 20)
    assert sum(p.numel() for p in net.parameters()) == convs + bns
    default = 3 * 32 * 9 + 32 * 64 * 9 + 64 * 128 * 9 + 128 * 128 * 9 + 2 * (32 + 64 + 128 + 128)
    assert sum(p.numel() for p in small_convnet().parameters()) == default == 241_184


def test_backward_reaches_first_layer() -> None:
    net = small_convnet(width=4, out_dim=8)
    net(torch.randn(3, 3, 8, 8)).sum().backward()
    assert net.features[0].weight.grad is not None
    assert torch.count_nonzero(net.features[0].weight.grad) > 0


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="out_dim"):
        small_convnet(out_dim=0)
    with pytest.raises(ValueError, match="x must have shape"):
        small_convnet()(torch.randn(2, 1, 8, 8))
