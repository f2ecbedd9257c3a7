"""Batch norms without the unread batch counter compute what torch's batch norms compute."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from contrastkit.models.batch_norm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from contrastkit.models.resnet import resnet18

CASES = [(BatchNorm1d, nn.BatchNorm1d, (8, 5)), (BatchNorm1d, nn.BatchNorm1d, (8, 5, 3)),
         (BatchNorm2d, nn.BatchNorm2d, (8, 5, 4, 3)),
         (BatchNorm3d, nn.BatchNorm3d, (8, 5, 2, 3, 2))]


def _pair(ours, theirs, momentum, affine=True):
    torch.manual_seed(0)
    reference = theirs(5, momentum=momentum, affine=affine)
    if affine:
        with torch.no_grad():
            reference.weight.uniform_(0.5, 1.5)
            reference.bias.uniform_(-0.5, 0.5)
    layer = ours(5, momentum=momentum, affine=affine)
    layer.load_state_dict(reference.state_dict())
    return layer, reference


@pytest.mark.parametrize("ours, theirs, shape", CASES)
@pytest.mark.parametrize("affine", [True, False])
def test_same_outputs_statistics_and_gradients_as_torch(ours, theirs, shape, affine) -> None:
    layer, reference = _pair(ours, theirs, 0.1, affine)
    for step in range(3):
        x = torch.randn(shape, dtype=torch.float64) * (step + 1) + step
        layer.double(), reference.double()
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        out, want = layer(a), reference(b)
        assert torch.equal(out, want)
        out.pow(2).sum().backward()
        want.pow(2).sum().backward()
        assert torch.equal(a.grad, b.grad)
        assert torch.equal(layer.running_mean, reference.running_mean)
        assert torch.equal(layer.running_var, reference.running_var)
    # the one difference: with a momentum the counter is not advanced (nothing reads it)
    assert int(reference.num_batches_tracked) == 3 and int(layer.num_batches_tracked) == 0
    assert set(layer.state_dict()) == set(reference.state_dict())
    layer.eval(), reference.eval()
    x = torch.randn(shape, dtype=torch.float64)
    assert torch.equal(layer(x), reference(x))


def test_without_momentum_the_counter_weights_the_cumulative_average() -> None:
    layer, reference = _pair(BatchNorm2d, nn.BatchNorm2d, None)
    for _ in range(3):
        x = torch.randn(6, 5, 3, 3)
        assert torch.equal(layer(x), reference(x))
    assert int(layer.num_batches_tracked) == int(reference.num_batches_tracked) == 3
    assert torch.equal(layer.running_mean, reference.running_mean)
    assert torch.equal(layer.running_var, reference.running_var)


def test_resnet_uses_them_and_loads_torch_checkpoints() -> None:
    model = resnet18(cifar_stem=True, width=8)
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert norms and all(isinstance(m, BatchNorm2d) for m in norms)
    state = copy.deepcopy(model.state_dict())
    state["bn1.num_batches_tracked"].fill_(7)  # a counter written by torch's layers
    model.load_state_dict(state)
    model(torch.randn(4, 3, 16, 16))
    assert int(model.bn1.num_batches_tracked) == 7
