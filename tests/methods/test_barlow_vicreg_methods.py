"""Barlow Twins and VICReg compose the shared encoder with their losses, symmetrically and
without stop-gradient; each states the loss a collapse gives."""

from __future__ import annotations

import math

import pytest
import torch

from contrastkit import losses
from contrastkit.methods import SCE, BarlowTwins, SimCLR, VICReg
from contrastkit.methods.barlow_twins import OFFICIAL_PROJECTOR
from contrastkit.methods.vicreg import OFFICIAL_EXPANDER
from contrastkit.models.factory import BackboneSpec, HeadSpec
from contrastkit.schedules import ScheduleState

TINY = {"backbone": BackboneSpec(name="small_convnet", width=4, out_dim=8),
        "projector": HeadSpec(hidden_dim=8, out_dim=6, num_layers=3, last_bias=False)}
STATE = ScheduleState(step=0, total_steps=10)


def _views(n: int = 8) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.rand(n, 3, 8, 8, generator=g, dtype=torch.float64).requires_grad_(True)
            for _ in range(2)]


@pytest.mark.parametrize("method_kind", ["barlow", "vicreg", "vicreg_paper"])
def test_the_loss_is_the_papers_on_the_online_projections_of_both_views(method_kind):
    torch.manual_seed(0)
    if method_kind == "barlow":
        method = BarlowTwins(lambd=0.02, scale_loss=0.1, **TINY).double()
    else:
        method = VICReg(std_coeff=10.0, halve_variance=method_kind == "vicreg", **TINY).double()
    views = _views()
    out = method(views, torch.zeros(8, dtype=torch.long), STATE)
    z1, z2 = method.encode(views[0])[1], method.encode(views[1])[1]
    if method_kind == "barlow":
        want = losses.barlow_twins(z1, z2, lambd=0.02, scale_loss=0.1)
    else:
        want = losses.vicreg(z1, z2, std_coeff=10.0, halve_variance=method_kind == "vicreg")
        for name, value in losses.vicreg_terms(
                z1, z2, halve_variance=method_kind == "vicreg").items():
            torch.testing.assert_close(out.logs[name], value.detach())
    torch.testing.assert_close(out.loss, want)
    torch.testing.assert_close(out.embedding, z1)
    assert not out.features.requires_grad and out.features.shape == (8, 8)
    # symmetric, no stop-gradient: both views get a gradient, and swapping them changes nothing
    grads = torch.autograd.grad(out.loss, views)
    assert all(float(g.abs().sum()) > 0 for g in grads)
    swapped = method(views[::-1], torch.zeros(8, dtype=torch.long), STATE)
    torch.testing.assert_close(swapped.loss, out.loss)


def test_each_method_states_the_loss_of_a_collapse():
    """The value each loss takes on a constant embedding (tests/losses check the losses)."""
    assert BarlowTwins(scale_loss=0.5, **TINY).collapse_loss() == 0.5 * 6
    assert VICReg(**TINY).collapse_loss() == pytest.approx(25 * (1 - math.sqrt(1e-4)))
    assert VICReg(halve_variance=False, **TINY).collapse_loss() == pytest.approx(50 * 0.99)
    method = VICReg(**TINY).double()
    constant = torch.zeros(8, 3, 8, 8, dtype=torch.float64)
    for module in method.modules():  # every output the same: the embedding has collapsed
        if isinstance(module, torch.nn.Linear):
            torch.nn.init.zeros_(module.weight)
    out = method([constant, constant], torch.zeros(8, dtype=torch.long), STATE)
    assert float(out.loss.detach()) == pytest.approx(method.collapse_loss())
    assert SimCLR(**TINY).collapse_loss() is None
    assert SCE(**TINY).collapse_loss() is None


def test_the_default_heads_are_the_official_ones():
    for head in (OFFICIAL_PROJECTOR, OFFICIAL_EXPANDER):
        assert (head.hidden_dim, head.out_dim, head.num_layers) == (8192, 8192, 3)
        assert (head.batch_norm, head.last_bias) == ("hidden", False)
    method = BarlowTwins(**TINY)
    linears = [m for m in method.projector.modules() if isinstance(m, torch.nn.Linear)]
    assert [m.bias is None for m in linears] == [True, True, True]


@pytest.mark.parametrize(("cls", "kwargs", "match"), [
    (BarlowTwins, {"lambd": -0.1}, "lambd"),
    (BarlowTwins, {"scale_loss": 0.0}, "scale_loss"),
    (VICReg, {"cov_coeff": -1.0}, "cov_coeff"),
])
def test_bad_settings_are_named(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**TINY, **kwargs)
