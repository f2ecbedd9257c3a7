"""MLP projector/predictor heads: layer structure for each SCE Table 21/24 BN option."""

import pytest
import torch
from torch import nn

from contrastkit.models import MLPHead, predictor, projector


def structure(head: MLPHead) -> list[tuple]:
    out = []
    for m in head.layers:
        if isinstance(m, nn.Linear):
            out.append(("linear", m.in_features, m.out_features, m.bias is not None))
        elif isinstance(m, nn.BatchNorm1d):
            out.append(("bn", m.num_features, m.affine))
        elif isinstance(m, nn.ReLU):
            out.append(("relu",))
        else:  # pragma: no cover
            raise AssertionError(type(m))
    return out


def test_none_two_layers() -> None:
    head = MLPHead(16, 32, 8, num_layers=2, batch_norm="none")
    assert structure(head) == [("linear", 16, 32, True), ("relu",), ("linear", 32, 8, True)]


def test_hidden_two_layers() -> None:
    head = MLPHead(16, 32, 8, num_layers=2, batch_norm="hidden")
    assert structure(head) == [
        ("linear", 16, 32, False), ("bn", 32, True), ("relu",), ("linear", 32, 8, True)
    ]


def test_all_three_layers() -> None:
    head = MLPHead(16, 32, 8, num_layers=3, batch_norm="all")
    assert structure(head) == [
        ("linear", 16, 32, False), ("bn", 32, True), ("relu",),
        ("linear", 32, 32, False), ("bn", 32, True), ("relu",),
        ("linear", 32, 8, False), ("bn", 8, False),
    ]


def test_hidden_three_layers_and_single_layer() -> None:
    head = MLPHead(16, 32, 8, num_layers=3, batch_norm="hidden")
    assert [s[0] for s in structure(head)] == [
        "linear", "bn", "relu", "linear", "bn", "relu", "linear"
    ]
    assert structure(MLPHead(16, 32, 8, num_layers=1, batch_norm="all")) == [
        ("linear", 16, 8, False), ("bn", 8, False)
    ]


@pytest.mark.parametrize("batch_norm", ["none", "hidden", "all"])
@pytest.mark.parametrize("last_bias", [True, False])
def test_last_bias_override(batch_norm: str, last_bias: bool) -> None:
    head = MLPHead(4, 6, 3, num_layers=2, batch_norm=batch_norm, last_bias=last_bias)
    last_linear = [m for m in head.layers if isinstance(m, nn.Linear)][-1]
    assert (last_linear.bias is not None) == last_bias


def test_output_bn_normalises_output() -> None:
    head = MLPHead(4, 6, 3, num_layers=2, batch_norm="all").double().train()
    x = torch.randn(64, 4, dtype=torch.float64)
    z = head(x)
    pre = head.layers[:-1](x)  # output of the last linear layer
    bn = head.layers[-1]
    expected = (pre - pre.mean(0)) / torch.sqrt(pre.var(0, unbiased=False) + bn.eps)
    torch.testing.assert_close(z, expected, rtol=0, atol=1e-12)


def test_factories_defaults_follow_tables() -> None:
    proj = projector(512)  # Table 21 R-18 CIFAR: 2 layers, 512 hid, 128 out, BN hid
    assert structure(proj) == [
        ("linear", 512, 512, False), ("bn", 512, True), ("relu",), ("linear", 512, 128, True)
    ]
    pred = predictor()  # Table 24 R3D-50: 2 layers, 4096 hid, 256 out, BN hid
    assert structure(pred) == [
        ("linear", 256, 4096, False), ("bn", 4096, True), ("relu",),
        ("linear", 4096, 256, True),
    ]
    assert proj(torch.randn(4, 512)).shape == (4, 128)
    assert proj.out_dim == 128


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="batch_norm"):
        MLPHead(4, 4, 4, batch_norm="hid")
    with pytest.raises(ValueError, match="num_layers"):
        MLPHead(4, 4, 4, num_layers=0)
    with pytest.raises(ValueError, match="x must have shape"):
        MLPHead(4, 4, 4)(torch.randn(2, 3, 4))
