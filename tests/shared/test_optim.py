"""Optimisers, parameter groups, linear scaling and warm-up + cosine schedules."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from contrastkit.optim import (
    LARS,
    build_optimizer,
    param_groups,
    scaled_lr,
    warmup_cosine,
    warmup_cosine_scheduler,
)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(4, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 3), nn.LayerNorm(3)
    ).double()


def test_param_groups_excludes_bias_and_norm() -> None:
    model = _model()
    groups = {g["name"]: g for g in param_groups(model, 0.1)}
    decay = {id(p) for p in groups["decay"]["params"]}
    no_decay = {id(p) for p in groups["no_decay"]["params"]}
    assert decay == {id(model[0].weight), id(model[3].weight)}
    expected = {model[0].bias, model[1].weight, model[1].bias, model[3].bias}
    expected |= {model[4].weight, model[4].bias}
    assert no_decay == {id(p) for p in expected}
    assert groups["decay"]["weight_decay"] == 0.1 and groups["decay"]["lars_adapt"]
    assert groups["no_decay"]["weight_decay"] == 0.0 and not groups["no_decay"]["lars_adapt"]
    single = param_groups(model, 0.1, exclude_bias_and_norm=False)
    assert len(single) == 1 and len(single[0]["params"]) == 8


def test_param_groups_skips_frozen_and_validates() -> None:
    model = _model()
    model[0].weight.requires_grad_(False)
    ids = {id(p) for g in param_groups(model, 0.0) for p in g["params"]}
    assert id(model[0].weight) not in ids
    with pytest.raises(ValueError, match="weight_decay"):
        param_groups(model, -1.0)


def test_lars_single_step_by_hand() -> None:
    w = torch.tensor([[3.0, 4.0]], dtype=torch.float64)  # ||w|| = 5
    b = torch.tensor([1.0, -2.0], dtype=torch.float64)
    pw, pb = nn.Parameter(w.clone()), nn.Parameter(b.clone())
    pw.grad = torch.tensor([[0.6, 0.8]], dtype=torch.float64)  # ||g|| = 1
    pb.grad = torch.tensor([0.5, 0.5], dtype=torch.float64)
    lr, wd, eta = 0.5, 0.1, 0.001
    opt = LARS(
        [
            {"params": [pw], "weight_decay": wd, "lars_adapt": True},
            {"params": [pb], "weight_decay": 0.0, "lars_adapt": False},
        ],
        lr=lr,
        momentum=0.9,
        eta=eta,
    )
    opt.step()
    # d = g + wd w = [0.9, 1.2]; trust = 0.001 * 5 / (1 + 0.1 * 5) = 1/300
    d = torch.tensor([[0.9, 1.2]], dtype=torch.float64) / 300.0
    torch.testing.assert_close(pw.detach(), w - lr * d, rtol=0, atol=1e-15)
    # excluded: plain SGD step, no decay, no adaptation
    torch.testing.assert_close(pb.detach(), b - lr * pb.grad, rtol=0, atol=1e-15)
    # second step: momentum buffer v = 0.9 v + d'
    w1 = pw.detach().clone()
    pw.grad = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    opt.step()
    d2 = pw.grad + wd * w1
    d2 = d2 * eta * w1.norm() / (pw.grad.norm() + wd * w1.norm())
    torch.testing.assert_close(pw.detach(), w1 - lr * (0.9 * d + d2), rtol=0, atol=1e-15)


def _lars_loop_step(params, grads, bufs, lr, wd, eta, mom, adapt) -> None:
    """One LARS step written parameter by parameter from the class docstring's formula."""
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        d = g + wd * p
        w_norm, g_norm = p.norm(), g.norm()
        if adapt and w_norm > 0 and g_norm > 0:
            d = d * (eta * w_norm / (g_norm + wd * w_norm))
        bufs[i] = d if bufs[i] is None or mom == 0 else mom * bufs[i] + d
        p -= lr * bufs[i]


@pytest.mark.parametrize("mom", [0.0, 0.9])
def test_lars_multi_tensor_step_equals_the_parameter_loop(mom: float) -> None:
    # Two groups (adapted with decay; excluded without), float32 and float64 parameters, a
    # zero parameter (trust 1), a parameter without gradient: three steps.
    g = torch.Generator().manual_seed(0)
    shapes = [(4, 3), (3,), (2, 2, 2), (5,)]
    start = [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]
    start[2].zero_()
    params = [nn.Parameter(t.clone()) for t in start]
    params[3].data = params[3].data.float()
    frozen = nn.Parameter(torch.ones(2))
    groups = [{"params": [params[0], params[2], params[3], frozen], "weight_decay": 0.05,
               "lars_adapt": True},
              {"params": [params[1]], "weight_decay": 0.0, "lars_adapt": False}]
    opt = LARS(groups, lr=0.4, momentum=mom, eta=0.02)
    reference = [p.detach().clone() for p in params]
    bufs: list = [None] * 4
    for step in range(3):
        grads = [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]
        grads[3] = grads[3].float()
        for p, gr in zip(params, grads, strict=True):
            p.grad = gr.clone()
        opt.step()
        adapted, plain = [0, 2, 3], [1]
        for indices, wd, adapt in ((adapted, 0.05, True), (plain, 0.0, False)):
            sub = [bufs[i] for i in indices]
            _lars_loop_step([reference[i] for i in indices], [grads[i] for i in indices],
                            sub, 0.4, wd, 0.02, mom, adapt)
            for i, b in zip(indices, sub, strict=True):
                bufs[i] = b
        for i, (p, r) in enumerate(zip(params, reference, strict=True)):
            torch.testing.assert_close(p.detach(), r, rtol=1e-6 if i == 3 else 1e-14,
                                       atol=0, msg=f"step {step}, parameter {i}")
    assert torch.equal(frozen.detach(), torch.ones(2))


def test_lars_step_dispatches_a_fixed_number_of_operators() -> None:
    """Multi-tensor operations: the operator count does not grow with the parameter count."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.calls += 1
            return func(*args, **(kwargs or {}))

    counts = []
    for n in (4, 40):
        params = [nn.Parameter(torch.randn(3)) for _ in range(n)]
        for p in params:
            p.grad = torch.randn(3)
        opt = LARS(params, lr=0.1, momentum=0.9, weight_decay=0.01)
        opt.step()  # first step: the momentum buffers are created
        Count.calls = 0
        with Count():
            opt.step()
        counts.append(Count.calls)
    assert counts[0] == counts[1] < 40, counts


def test_lars_zero_norms_fall_back_to_trust_one() -> None:
    p = nn.Parameter(torch.zeros(2, 2, dtype=torch.float64))
    p.grad = torch.ones(2, 2, dtype=torch.float64)
    LARS([p], lr=0.1, momentum=0.0).step()
    torch.testing.assert_close(p.detach(), torch.full((2, 2), -0.1, dtype=torch.float64))


def test_lars_with_all_groups_excluded_equals_sgd() -> None:
    a, b = _model(), _model()
    x = torch.randn(6, 4, dtype=torch.float64)
    lars = LARS(a.parameters(), lr=0.3, momentum=0.9, weight_decay=0.01, lars_adapt=False)
    sgd = torch.optim.SGD(b.parameters(), lr=0.3, momentum=0.9, weight_decay=0.01)
    for _ in range(3):
        for model, opt in ((a, lars), (b, sgd)):
            opt.zero_grad()
            model(x).pow(2).sum().backward()
            opt.step()
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(pa, pb)


def test_build_optimizer_lars_excludes_bn_from_decay_and_adaptation() -> None:
    model = _model()
    opt = build_optimizer("LARS", model, lr=1.0, weight_decay=0.5, momentum=0.0)
    assert isinstance(opt, LARS)
    bn_w = model[1].weight
    before = bn_w.detach().clone()
    bn_w.grad = torch.full_like(bn_w, 0.25)
    for p in model.parameters():
        if p is not bn_w:
            p.grad = torch.zeros_like(p)
    opt.step()
    # excluded: w - lr * g exactly (no decay, no trust ratio)
    torch.testing.assert_close(bn_w.detach(), before - 0.25)


@pytest.mark.parametrize(
    ("name", "cls"), [("sgd", torch.optim.SGD), ("adamw", torch.optim.AdamW), ("lars", LARS),
                      ("adam", torch.optim.Adam)]
)
def test_build_optimizer_kinds(name: str, cls: type) -> None:
    opt = build_optimizer(name, _model(), lr=0.1, weight_decay=1e-4)
    assert type(opt) is cls  # AdamW is a subclass of Adam in recent torch
    assert sorted(g["weight_decay"] for g in opt.param_groups) == [0.0, 1e-4]
    opt2 = build_optimizer(name, list(_model().parameters()), lr=0.1, weight_decay=1e-4)
    assert [g["weight_decay"] for g in opt2.param_groups] == [1e-4]
    with pytest.raises(ValueError, match="optimizer name"):
        build_optimizer("adam9", _model(), lr=0.1)


def test_scaled_lr() -> None:
    assert scaled_lr(0.3, 4096) == pytest.approx(4.8)
    assert scaled_lr(2.4, 512) == pytest.approx(4.8)
    assert scaled_lr(0.5, 256) == 0.5
    with pytest.raises(ValueError, match="global_batch"):
        scaled_lr(0.1, 0)


def test_warmup_cosine_values() -> None:
    kw = {"total_steps": 110, "warmup_steps": 10, "base_lr": 1.0, "final_lr": 0.1}
    assert warmup_cosine(0, **kw) == 0.0
    assert warmup_cosine(5, **kw) == pytest.approx(0.5)
    assert warmup_cosine(10, **kw) == pytest.approx(1.0)
    assert warmup_cosine(60, **kw) == pytest.approx(0.55)  # cosine midpoint
    assert warmup_cosine(35, **kw) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4)))
    assert warmup_cosine(110, **kw) == pytest.approx(0.1)
    assert warmup_cosine(500, **kw) == pytest.approx(0.1)
    assert warmup_cosine(5, 110, 10, 1.0, start_lr=0.2) == pytest.approx(0.6)
    assert warmup_cosine(0, 100, 0, 2.0) == 2.0
    assert warmup_cosine(50, 100, 0, 2.0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="total_steps"):
        warmup_cosine(0, 0, 0, 1.0)


def test_scheduler_factory_per_step() -> None:
    params = [nn.Parameter(torch.zeros(1))]
    opt = torch.optim.SGD(
        [{"params": params, "lr": 0.4}, {"params": [nn.Parameter(torch.zeros(1))], "lr": 0.2}],
        lr=0.4,
    )
    sched = warmup_cosine_scheduler(opt, total_steps=20, warmup_steps=4, final_ratio=0.25)
    for step in range(22):
        for g, base in zip(opt.param_groups, (0.4, 0.2), strict=True):
            expected = warmup_cosine(step, 20, 4, base, final_lr=0.25 * base)
            assert g["lr"] == pytest.approx(expected, abs=1e-12)
        opt.step()
        sched.step()
