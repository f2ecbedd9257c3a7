"""VICReg loss against loops written from the paper's equations (float64), the official
code's halved variance term and the paper's eq. 6 both ways."""

from __future__ import annotations

import math

import pytest
import torch
from loss_inputs import F64, make

from contrastkit.losses import VICRegLoss, vicreg, vicreg_terms


def ref_invariance(z1, z2):
    """Eq. 5 divided by d (the mean over all n x d elements, as the code computes it)."""
    n, d = z1.shape
    return sum((z1[i, j] - z2[i, j]) ** 2 for i in range(n) for j in range(d)) / (n * d)


def ref_v(z, gamma=1.0, eps=1e-4):
    """Eqs. 1-2: (1/d) sum_j max(0, gamma - sqrt(Var(z^j) + eps)), unbiased variance."""
    n, d = z.shape
    total = 0.0
    for j in range(d):
        mean = sum(z[i, j] for i in range(n)) / n
        var = sum((z[i, j] - mean) ** 2 for i in range(n)) / (n - 1)
        total = total + torch.clamp(gamma - torch.sqrt(var + eps), min=0)
    return total / d


def ref_c(z):
    """Eqs. 3-4: (1/d) sum_{i != j} C(Z)_ij^2, C with 1 / (n - 1)."""
    n, d = z.shape
    mean = [sum(z[b, i] for b in range(n)) / n for i in range(d)]
    total = 0.0
    for i in range(d):
        for j in range(d):
            if i != j:
                cov = sum((z[b, i] - mean[i]) * (z[b, j] - mean[j]) for b in range(n)) / (n - 1)
                total = total + cov ** 2
    return total / d


def ref_vicreg(z1, z2, lam, mu, nu, halve, g1=None, g2=None):
    """Eq. 6, the variance term halved as the official code has it when ``halve``."""
    g1 = z1 if g1 is None else g1
    g2 = z2 if g2 is None else g2
    v = ref_v(g1) + ref_v(g2)
    return lam * ref_invariance(z1, z2) + mu * (v / 2 if halve else v) + nu * (ref_c(g1)
                                                                               + ref_c(g2))


@pytest.mark.parametrize(("n", "d"), [(2, 3), (7, 5), (16, 8)])
@pytest.mark.parametrize("halve", [True, False])
def test_matches_the_equations(n, d, halve):
    z1, z2, _ = make(n, d, seed=n * d)
    # half the columns with a small spread: some hinges active, some not
    scale = torch.tensor([0.3 if j % 2 else 2.0 for j in range(d)], dtype=F64)
    z1, z2 = (z1 * scale).detach().requires_grad_(), (z2 * scale).detach().requires_grad_()
    got = vicreg(z1, z2, sim_coeff=3.0, std_coeff=5.0, cov_coeff=0.7, halve_variance=halve)
    want = ref_vicreg(z1, z2, 3.0, 5.0, 0.7, halve)
    torch.testing.assert_close(got, torch.as_tensor(want, dtype=F64), rtol=1e-10, atol=1e-12)
    for g, w in zip(torch.autograd.grad(got, (z1, z2)), torch.autograd.grad(want, (z1, z2)),
                    strict=True):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-12)


def test_halving_is_the_only_difference_between_the_code_and_eq_6():
    z1, z2, _ = make(9, 4, seed=1, grad=False)
    halved = vicreg_terms(z1, z2)
    paper = vicreg_terms(z1, z2, halve_variance=False)
    assert float(paper["variance"]) > 0
    assert float(paper["variance"]) == pytest.approx(2 * float(halved["variance"]), rel=1e-14)
    for name in ("invariance", "covariance"):
        assert float(paper[name]) == float(halved[name])
    gap = vicreg(z1, z2, halve_variance=False) - vicreg(z1, z2)
    assert float(gap) == pytest.approx(25.0 * float(halved["variance"]), rel=1e-12)


def test_global_views_take_the_variance_and_covariance_only():
    """The official code under DDP: invariance on the local rows, the rest on the gathered."""
    z1, z2, _ = make(6, 4, seed=2, grad=False)
    g1, g2, _ = make(10, 4, seed=3, grad=False)
    got = vicreg_terms(z1, z2, global_views=(g1, g2))
    assert float(got["invariance"]) == pytest.approx(float(ref_invariance(z1, z2)), rel=1e-12)
    assert float(got["variance"]) == pytest.approx(float(ref_v(g1) + ref_v(g2)) / 2, rel=1e-12)
    assert float(got["covariance"]) == pytest.approx(float(ref_c(g1) + ref_c(g2)), rel=1e-12)
    with pytest.raises(ValueError, match="embedding dimension"):
        vicreg_terms(z1, z2, global_views=(g1[:, :3], g2[:, :3]))


def test_each_term_vanishes_where_it_should():
    basis = torch.cat([torch.ones(20, 1, dtype=F64), torch.randn(20, 6, dtype=F64)], dim=1)
    z = 10.0 * torch.linalg.qr(basis)[0][:, 1:]  # centred, decorrelated, Var = 100/19 > 1
    terms = vicreg_terms(z, z)
    assert float(terms["invariance"]) == 0.0
    assert float(terms["variance"]) == 0.0  # every hinge inactive
    assert float(terms["covariance"]) == pytest.approx(0.0, abs=1e-20)
    z.requires_grad_(True)
    (grad,) = torch.autograd.grad(vicreg_terms(z, z.detach() + 1.0)["variance"], z)
    assert float(grad.abs().max()) == 0.0  # no gradient through an inactive hinge


def test_a_collapse_gives_the_variance_hinge_at_zero_spread():
    """A constant embedding: each hinge is gamma - sqrt(eps) = 0.99, the loss mu * 0.99 (code)
    or 2 mu * 0.99 (eq. 6): what VICReg.collapse_loss states."""
    z = torch.full((8, 5), 3.0, dtype=F64)
    assert float(vicreg(z, z)) == pytest.approx(25.0 * (1 - math.sqrt(1e-4)))
    assert float(vicreg(z, z, halve_variance=False)) == pytest.approx(50.0 * 0.99)


def test_the_views_play_the_same_part_and_the_module_form():
    z1, z2, _ = make(7, 3, seed=4, grad=False)
    torch.testing.assert_close(vicreg(z1, z2), vicreg(z2, z1), rtol=1e-12, atol=0)
    module = VICRegLoss(sim_coeff=1.0, halve_variance=False)
    assert float(module(z1, z2)) == float(vicreg(z1, z2, sim_coeff=1.0, halve_variance=False))


def test_bad_input():
    z1, z2, _ = make(5, 3, seed=5, grad=False)
    with pytest.raises(ValueError, match="z1 has batch size 1"):
        vicreg(z1[:1], z2[:1])
    with pytest.raises(ValueError, match="std_coeff"):
        vicreg(z1, z2, std_coeff=-1.0)
    with pytest.raises(ValueError, match="gamma"):
        VICRegLoss(gamma=0.0)
    with pytest.raises(ValueError, match="dtype of z1"):
        vicreg(z1, z2.float())
