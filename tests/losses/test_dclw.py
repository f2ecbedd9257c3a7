"""DCLW (DCL with the negative von Mises-Fisher weight) against a loop over the 2N views written
from the equation (float64)."""

from __future__ import annotations

import pytest
import torch
from loss_inputs import make, unit

from contrastkit.losses import DCLWLoss, DySTreSSTemperature, dcl, dclw


def tau(t, s):
    return t(s.detach()) if callable(t) else t


def weights(z1, z2, sigma, detach=True):
    """w_i = 2 - exp(s_i / sigma) / ((1/N) sum_j exp(s_j / sigma)), s_i = cos(z1_i, z2_i)."""
    s = (unit(z1) * unit(z2)).sum(1)
    s = s.detach() if detach else s
    e = torch.exp(s / sigma)
    return 2 - e / e.mean()


def ref_dclw(z1, z2, temperature, sigma, detach=True):
    """Mean over the 2N anchors of -w s_{aa+}/tau + log sum_{b != a, a+} exp(s_ab/tau)."""
    w = weights(z1, z2, sigma, detach).repeat(2)
    z = unit(torch.cat([z1, z2]))
    n2 = z.shape[0]
    losses = []
    for a in range(n2):
        p = (a + n2 // 2) % n2
        s_pos = z[a] @ z[p]
        neg = sum(torch.exp(z[a] @ z[b] / tau(temperature, z[a] @ z[b]))
                  for b in range(n2) if b not in (a, p))
        losses.append(-w[a] * s_pos / tau(temperature, s_pos) + torch.log(neg))
    return torch.stack(losses).mean()


@pytest.mark.parametrize("n,d", [(2, 3), (5, 4), (9, 6)])
@pytest.mark.parametrize("temperature,sigma", [(0.1, 0.5), (0.5, 0.1),
                                               (DySTreSSTemperature(0.07, 0.2), 0.5)])
def test_dclw_matches_loop(n, d, temperature, sigma):
    z1, z2, _ = make(n, d)
    ours = dclw(z1, z2, temperature=temperature, sigma=sigma)
    ref = ref_dclw(z1, z2, temperature, sigma)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-10)
    for g_ours, g_ref in zip(torch.autograd.grad(ours, (z1, z2)),
                             torch.autograd.grad(ref, (z1, z2)), strict=True):
        torch.testing.assert_close(g_ours, g_ref, rtol=0, atol=1e-10)


def test_weights_are_constants_for_the_gradient():
    """Detached weights (lightly's form): the gradient differs from a weight that is trained."""
    z1, z2, _ = make(6, 4)
    ours = torch.autograd.grad(dclw(z1, z2), z1)[0]
    trained = torch.autograd.grad(ref_dclw(z1, z2, 0.1, 0.5, detach=False), z1)[0]
    assert float((ours - trained).abs().max()) > 1e-3


def test_weights_average_to_one_and_flat_weights_give_dcl():
    z1, z2, _ = make(7, 5, grad=False)
    torch.testing.assert_close(weights(z1, z2, 0.5).mean(), torch.tensor(1.0, dtype=z1.dtype))
    # sigma -> infinity: every weight -> 1, DCLW -> DCL
    torch.testing.assert_close(dclw(z1, z2, temperature=0.2, sigma=1e9),
                               dcl(z1, z2, temperature=0.2), rtol=0, atol=1e-6)
    assert not torch.isclose(dclw(z1, z2, temperature=0.2, sigma=0.1),
                             dcl(z1, z2, temperature=0.2), rtol=1e-4)


def test_module_equals_function():
    z1, z2, _ = make(5, 4, grad=False)
    torch.testing.assert_close(DCLWLoss(temperature=0.2, sigma=0.3)(z1, z2),
                               dclw(z1, z2, temperature=0.2, sigma=0.3))


@pytest.mark.parametrize("sigma", [0.0, -1.0, float("inf"), "a"])
def test_bad_sigma_is_named(sigma):
    z1, z2, _ = make(5, 4, grad=False)
    with pytest.raises(ValueError, match="sigma"):
        dclw(z1, z2, sigma=sigma)
    with pytest.raises(ValueError, match="sigma"):
        DCLWLoss(sigma=sigma)
