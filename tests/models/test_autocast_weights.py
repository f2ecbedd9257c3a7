"""One multi-tensor copy for autocast's weight casts changes nothing that is computed."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from contrastkit.methods import SCE, SimCLR
from contrastkit.models.autocast_weights import CastWeights
from contrastkit.models.factory import BackboneSpec
from contrastkit.schedules import ScheduleState

BACKBONE = BackboneSpec(name="resnet18", cifar_stem=True, width=4)


def _step(method: nn.Module, views: list[torch.Tensor], use_casts: bool) -> tuple:
    if not use_casts:  # the plain path: autocast casts each weight itself
        method.online_casts.slots, method.target_casts.slots = [], []
    with torch.autocast("cpu", dtype=torch.bfloat16):
        state = ScheduleState(step=0, total_steps=10, epoch=0.0, total_epochs=1)
        out = method(views, torch.zeros(views[0].shape[0]), state)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in method.named_parameters() if p.grad is not None}
    return out.loss.detach(), grads


@pytest.mark.parametrize("make", [
    lambda: SCE(backbone=BACKBONE, queue_size=32, shuffle_bn=2),
    lambda: SCE(backbone=BACKBONE, queue_size=32, symmetric=True),  # two views per encoder
    lambda: SimCLR(backbone=BACKBONE),
])
def test_same_loss_and_gradients_as_autocast_itself(make) -> None:
    torch.manual_seed(0)
    views = [torch.randn(8, 3, 16, 16).contiguous(memory_format=torch.channels_last)
             for _ in range(2)]
    results = []
    for use_casts in (True, False):
        torch.manual_seed(1)
        method = make().to(memory_format=torch.channels_last).train()
        results.append(_step(method, views, use_casts))
    (loss, grads), (want_loss, want_grads) = results
    assert torch.equal(loss, want_loss)
    assert grads.keys() == want_grads.keys() and grads
    for name, grad in grads.items():
        assert grad.dtype == torch.float32
        assert torch.equal(grad, want_grads[name]), name


def test_the_weights_are_restored_and_cast_once_per_session() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 2))
    casts = CastWeights(model)
    assert len(casts.slots) == 4  # conv and linear, weight and bias
    before = [model[0].weight, model[3].bias]
    x = torch.randn(2, 3, 6, 6)
    seen = []
    with torch.autocast("cpu", dtype=torch.bfloat16), casts.session():
        for _ in range(2):
            with casts.applied(x):
                seen.append(model[0].weight)
                assert model[0].weight.dtype == model[3].bias.dtype == torch.bfloat16
                model(x)
    assert seen[0] is seen[1]  # one cast shared by both calls
    assert torch.equal(seen[0], before[0].detach().to(torch.bfloat16))
    assert model[0].weight is before[0] and model[3].bias is before[1]
    with casts.applied(x):  # no autocast: the weights themselves
        assert model[0].weight is before[0]


def test_float64_weights_are_left_to_autocast() -> None:
    model = nn.Linear(3, 2).double()
    with torch.autocast("cpu", dtype=torch.bfloat16), CastWeights(model).applied(
            torch.randn(1, 3)):
        assert model.weight.dtype == torch.float64


def test_multi_process_runs_keep_autocasts_own_casts_where_gradients_flow(monkeypatch) -> None:
    """Under DDP the gradients must leave the backward one bucket at a time (no single copy)."""
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 2)
    model = nn.Linear(3, 2)
    casts = CastWeights(model)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with casts.applied(torch.randn(1, 3)):
            assert model.weight.dtype == torch.float32  # left to autocast
        with torch.no_grad(), casts.applied(torch.randn(1, 3)):
            assert model.weight.dtype == torch.bfloat16  # no gradient: one copy is fine
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 1)
    with torch.autocast("cpu", dtype=torch.bfloat16), casts.applied(torch.randn(1, 3)):
        assert model.weight.dtype == torch.bfloat16
