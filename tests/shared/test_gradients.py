"""Per-parameter gradient clipping (DINO's ``clip_gradients``) and frozen layers (DINO's last
layer, SwAV's prototypes), against loops written from the official code."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from contrastkit.gradients import (
    CLIP_EPS,
    GradientFreeze,
    clip_grad_norm_per_parameter_,
    drop_frozen_gradients,
)
from contrastkit.schedules import ScheduleState


def _with_grads(*norms: float) -> list[nn.Parameter]:
    """Float64 parameters whose gradients have the given L2 norms (random directions)."""
    g = torch.Generator().manual_seed(0)
    params = []
    for i, norm in enumerate(norms):
        p = nn.Parameter(torch.zeros(3 + i, 2, dtype=torch.float64))
        direction = torch.randn(p.shape, generator=g, dtype=torch.float64)
        p.grad = direction / direction.norm() * norm
        params.append(p)
    return params


def _dino_clip_gradients(params, clip):
    """facebookresearch/dino utils.clip_gradients, one parameter at a time."""
    for p in params:
        if p.grad is not None:
            coef = clip / (float(p.grad.norm()) + 1e-6)
            if coef < 1:
                p.grad.mul_(coef)


def test_each_gradient_is_clipped_on_its_own_as_dinos_loop():
    ours, theirs = _with_grads(0.5, 3.0, 10.0, 2.999), _with_grads(0.5, 3.0, 10.0, 2.999)
    clip_grad_norm_per_parameter_(ours, 3.0)
    _dino_clip_gradients(theirs, 3.0)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=1e-15)
    norms = [float(p.grad.norm()) for p in ours]
    assert norms[0] == pytest.approx(0.5)  # below the threshold: untouched
    assert norms[2] == pytest.approx(3.0 * 10.0 / (10.0 + CLIP_EPS))
    # a joint-norm clip (Lightning's gradient_clip_val) would have shrunk the small one too
    joint = _with_grads(0.5, 3.0, 10.0, 2.999)
    torch.nn.utils.clip_grad_norm_(joint, 3.0)
    assert float(joint[0].grad.norm()) < 0.2


def test_parameters_without_gradient_are_skipped_and_bad_norms_refused():
    params = _with_grads(5.0, 5.0)
    params[1].grad = None
    clip_grad_norm_per_parameter_(params, 1.0)
    assert params[1].grad is None and float(params[0].grad.norm()) == pytest.approx(1.0)
    for bad in (0.0, -1.0, float("inf"), True):
        with pytest.raises(ValueError, match="max_norm"):
            clip_grad_norm_per_parameter_(params, bad)


def test_a_freeze_lasts_until_its_step_or_epoch():
    by_step, by_epoch = GradientFreeze(until=3, unit="step"), GradientFreeze(until=1, unit="epoch")
    states = [ScheduleState(step=s, total_steps=20, epoch=s / 4, total_epochs=5.0)
              for s in range(6)]
    assert [by_step.active(s) for s in states] == [True, True, True, False, False, False]
    assert [by_epoch.active(s) for s in states] == [True, True, True, True, False, False]
    assert not GradientFreeze().active(states[0])  # until 0: never frozen
    with pytest.raises(ValueError, match="unit"):
        GradientFreeze(1, "iteration")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="until"):
        GradientFreeze(-1)


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
        self.head_extra = nn.Linear(2, 2)  # shares the prefix "head" but not "head."


def _net_with_grads() -> _Net:
    net = _Net()
    for p in net.parameters():
        p.grad = torch.ones_like(p)
    return net


def test_frozen_gradients_are_dropped_by_name_while_the_freeze_lasts():
    net = _net_with_grads()
    freezes = {"head.1": GradientFreeze(2, "step")}
    drop_frozen_gradients(net, freezes, ScheduleState(step=1, total_steps=10))
    dropped = {n for n, p in net.named_parameters() if p.grad is None}
    assert dropped == {"head.1.weight", "head.1.bias"}
    net = _net_with_grads()
    drop_frozen_gradients(net, {"head": GradientFreeze(2, "step")},
                          ScheduleState(step=1, total_steps=10))
    assert {n for n, p in net.named_parameters() if p.grad is None} == {
        "head.0.weight", "head.0.bias", "head.1.weight", "head.1.bias"}
    net = _net_with_grads()
    drop_frozen_gradients(net, freezes, ScheduleState(step=2, total_steps=10))
    assert all(p.grad is not None for p in net.parameters())


def test_a_freeze_naming_no_parameter_is_refused():
    with pytest.raises(ValueError, match="'prototypes' names no parameter of _Net"):
        drop_frozen_gradients(_net_with_grads(), {"prototypes": GradientFreeze(1)},
                              ScheduleState(step=0, total_steps=10))
