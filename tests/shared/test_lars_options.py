"""LARS's options for the non-contrastive baselines' recipes: ``clip_lr``, ``eta`` and the two
trust-ratio denominators, against a float64 restatement of the update rule and against the LARS
of solo-learn and of the official Barlow Twins / VICReg codes, each re-stated below in this
file's own words (read at the commits named; not copied):

* solo-learn, vturrisi/solo-learn @ 9187ea3, ``solo/utils/lars.py`` (``LARS.step``): for a
  tensor that is not 1-D (or any tensor without ``exclude_bias_n_norm``) with non-zero norms,
  ``t = eta ||w|| / (||g|| + wd ||w|| + eps)``, with ``clip_lr`` ``t = min(t / lr, 1)``, then
  ``d = t (g + wd w)``; a 1-D tensor with ``exclude_bias_n_norm`` gets neither the scaling nor
  the weight decay; then SGD momentum ``v = m v + d`` (``v_1 = d``), ``w -= lr v``.
* Barlow Twins, facebookresearch/barlowtwins @ 8e8d284, ``main.py`` (``LARS.step`` with
  ``weight_decay_filter`` and ``lars_adaptation_filter`` on 1-D tensors) and VICReg,
  facebookresearch/vicreg @ 4e12602, ``main_vicreg.py`` (the same, ``exclude_bias_and_norm``):
  ``d = g + wd w`` and ``t = eta ||w|| / ||d||`` for tensors that are not 1-D, ``d = g`` for
  1-D ones; ``mu = m mu + d`` from zero; ``w -= lr mu``.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from contrastkit.optim import LARS, build_optimizer, param_groups

F64 = torch.float64


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 4)).double()


def _batches(steps: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randn(12, 6, generator=g, dtype=F64) for _ in range(steps)]


def _loss(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return (model(x) - 0.3).square().mean()


#: a warm-up then a decay, as the scheduler sets the groups' lr step by step
LRS = [0.05, 0.2, 0.4, 0.3, 0.1]


def _run_contrastkit(**options) -> nn.Module:
    model = _model()
    opt = build_optimizer("lars", model, lr=LRS[0], weight_decay=1e-2, momentum=0.9, **options)
    for lr, x in zip(LRS, _batches(len(LRS)), strict=True):
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad()
        _loss(model, x).backward()
        opt.step()
    return model


def _run_reference(step_direction) -> nn.Module:
    """The same steps with ``step_direction(p, lr) -> d`` and momentum 0.9 from v_1 = d."""
    model = _model()
    bufs: dict[int, torch.Tensor] = {}
    for lr, x in zip(LRS, _batches(len(LRS)), strict=True):
        model.zero_grad()
        _loss(model, x).backward()
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                d = step_direction(p, lr)
                bufs[i] = d if i not in bufs else 0.9 * bufs[i] + d
                p -= lr * bufs[i]
    return model


def _rule(trust_ratio: str, clip_lr: bool, eta: float):
    """The class docstring's rule, one tensor at a time (biases and BN excluded: 1-D)."""
    def direction(p, lr):
        g, wd = p.grad, 1e-2
        if p.ndim <= 1:
            return g.clone()
        d = g + wd * p
        denominator = d.norm() if trust_ratio == "update" else g.norm() + wd * p.norm()
        t = eta * p.norm() / denominator
        return d * (min(float(t) / lr, 1.0) if clip_lr else t)
    return direction


def _solo_learn_lars(eta: float, clip_lr: bool):
    """solo-learn's ``LARS.step`` with ``exclude_bias_n_norm`` (module docstring)."""
    def direction(p, lr):
        g, wd = p.grad, 1e-2
        w_norm, g_norm = torch.norm(p), torch.norm(g)
        if p.ndim != 1 and w_norm != 0 and g_norm != 0:
            t = eta * w_norm / (g_norm + w_norm * wd + 1e-8)
            if clip_lr:
                t = min(t / lr, 1)
            return (g + wd * p) * t
        return g.clone()
    return direction


def _official_lars(eta: float):
    """Barlow Twins' and VICReg's ``LARS.step`` with their 1-D filters (module docstring)."""
    def direction(p, lr):
        g, wd = p.grad, 1e-2
        if p.ndim == 1:
            return g.clone()
        d = g + wd * p
        w_norm, d_norm = torch.norm(p), torch.norm(d)
        return d * (eta * w_norm / d_norm if w_norm > 0 and d_norm > 0 else 1.0)
    return direction


def _assert_same(a: nn.Module, b: nn.Module, tol: float) -> None:
    for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=tol, atol=tol, msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize("trust_ratio", ["paper", "update"])
@pytest.mark.parametrize("clip_lr", [False, True])
@pytest.mark.parametrize("eta", [0.001, 0.02, 2.0])
def test_the_update_rule_in_float64(trust_ratio: str, clip_lr: bool, eta: float) -> None:
    got = _run_contrastkit(eta=eta, clip_lr=clip_lr, trust_ratio=trust_ratio)
    _assert_same(got, _run_reference(_rule(trust_ratio, clip_lr, eta)), tol=1e-13)


@pytest.mark.parametrize("clip_lr", [False, True])
def test_solo_learns_lars(clip_lr: bool) -> None:
    """solo-learn's CIFAR settings (eta 0.02, clip_lr, exclude_bias_n_norm): its eps of 1e-8
    in the denominator is the only difference."""
    got = _run_contrastkit(eta=0.02, clip_lr=clip_lr)
    _assert_same(got, _run_reference(_solo_learn_lars(0.02, clip_lr)), tol=1e-7)


def test_the_official_barlow_twins_and_vicreg_lars() -> None:
    got = _run_contrastkit(eta=0.001, trust_ratio="update")
    _assert_same(got, _run_reference(_official_lars(0.001)), tol=1e-13)
    paper = _run_contrastkit(eta=0.001)  # the other denominator is another optimiser
    assert max(float((p - q).detach().abs().max()) for p, q in zip(
        paper.parameters(), got.parameters(), strict=True)) > 1e-6


def test_clip_lr_caps_the_adapted_learning_rate_at_lr() -> None:
    """With a trust ratio far above lr the clipped step is lr (g + wd w), plain SGD's; far
    below, clipping changes nothing."""
    for eta, clipped in ((50.0, True), (1e-4, False)):
        w = nn.Parameter(torch.tensor([[3.0, -4.0]], dtype=F64))  # ||w|| = 5
        w.grad = torch.tensor([[0.3, 0.4]], dtype=F64)  # ||g|| = 0.5
        start = w.detach().clone()
        LARS([w], lr=0.1, momentum=0.0, weight_decay=0.0, eta=eta, clip_lr=True).step()
        trust = eta * 5 / 0.5
        want = start - (0.1 if clipped else trust) * w.grad
        torch.testing.assert_close(w.detach(), want, rtol=1e-15, atol=0)


def test_excluded_parameters_get_neither_adaptation_nor_decay() -> None:
    """Biases and BN (1-D, and any parameter of a norm layer) take plain SGD steps: what the
    official codes' filters and solo-learn's exclude_bias_n_norm do."""
    model = _model()
    groups = {g["name"]: g for g in param_groups(model, 0.5)}
    assert {id(p) for p in groups["no_decay"]["params"]} == {
        id(p) for p in model.parameters() if p.ndim == 1}
    opt = LARS(list(groups.values()), lr=0.1, momentum=0.0, eta=0.001, clip_lr=True,
               trust_ratio="update")
    bias = model[0].bias
    start = bias.detach().clone()
    _loss(model, _batches(1)[0]).backward()
    opt.step()
    torch.testing.assert_close(bias.detach(), start - 0.1 * bias.grad, rtol=1e-15, atol=0)


def test_a_bad_trust_ratio_is_named() -> None:
    with pytest.raises(ValueError, match="trust_ratio must be one of"):
        LARS([nn.Parameter(torch.ones(2))], lr=0.1, trust_ratio="norm")
