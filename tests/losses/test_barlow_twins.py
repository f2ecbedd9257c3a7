"""Barlow Twins loss against loops written from the paper's equations (float64)."""

from __future__ import annotations

import math

import pytest
import torch
from loss_inputs import F64, make

from contrastkit.losses import BarlowTwinsLoss, barlow_twins


def ref_cross_correlation(z1, z2, eps):
    """C_ij one entry at a time: eq. 2 (cosine of the mean-centred columns) for eps = 0, the
    batch-norm form (biased variance + eps) otherwise."""
    n, d = z1.shape
    c = torch.zeros(d, d, dtype=F64)
    for i in range(d):
        a = z1[:, i] - sum(z1[b, i] for b in range(n)) / n
        for j in range(d):
            b_ = z2[:, j] - sum(z2[b, j] for b in range(n)) / n
            if eps == 0:
                num = sum(a[b] * b_[b] for b in range(n))
                c[i, j] = num / (math.sqrt(sum(float(a[b]) ** 2 for b in range(n)))
                                 * math.sqrt(sum(float(b_[b]) ** 2 for b in range(n))))
            else:
                var_a = sum(a[b] ** 2 for b in range(n)) / n
                var_b = sum(b_[b] ** 2 for b in range(n)) / n
                c[i, j] = sum(a[b] / torch.sqrt(var_a + eps) * b_[b] / torch.sqrt(var_b + eps)
                              for b in range(n)) / n
    return c


def ref_barlow_twins(z1, z2, lambd, scale_loss=1.0, eps=1e-5):
    """Eq. 1: sum_i (1 - C_ii)^2 + lambda sum_i sum_{j != i} C_ij^2, times the scale."""
    c = ref_cross_correlation(z1, z2, eps)
    d = c.shape[0]
    on = sum((1 - c[i, i]) ** 2 for i in range(d))
    off = sum(c[i, j] ** 2 for i in range(d) for j in range(d) if j != i)
    return scale_loss * (on + lambd * off)


@pytest.mark.parametrize(("n", "d"), [(2, 3), (7, 5), (16, 8)])
@pytest.mark.parametrize("eps", [0.0, 1e-5, 0.3])
def test_matches_the_equations(n, d, eps):
    z1, z2, _ = make(n, d, seed=n + d)
    got = barlow_twins(z1, z2, lambd=0.02, eps=eps)
    want = ref_barlow_twins(z1.detach(), z2.detach(), 0.02, eps=eps)
    torch.testing.assert_close(got, torch.as_tensor(want, dtype=F64), rtol=1e-10, atol=1e-10)


def test_gradients_match_the_equations():
    z1, z2, _ = make(6, 4, seed=1)
    got = torch.autograd.grad(barlow_twins(z1, z2, lambd=0.1), (z1, z2))
    want = torch.autograd.grad(ref_barlow_twins(z1, z2, 0.1), (z1, z2))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-10)


def test_the_two_terms_and_their_weights():
    """L = s (on + lambda off): lambda 0 leaves the on-diagonal term, L is linear in lambda,
    and the scale multiplies the whole loss (solo-learn's scale_loss)."""
    z1, z2, _ = make(9, 6, seed=2, grad=False)
    c = ref_cross_correlation(z1, z2, 1e-5)
    on = float(((torch.diagonal(c) - 1) ** 2).sum())
    off = float((c ** 2).sum() - (torch.diagonal(c) ** 2).sum())
    assert float(barlow_twins(z1, z2, lambd=0.0)) == pytest.approx(on, rel=1e-12)
    assert float(barlow_twins(z1, z2, lambd=0.5)) == pytest.approx(on + 0.5 * off, rel=1e-12)
    assert float(barlow_twins(z1, z2, lambd=0.5, scale_loss=0.1)) == pytest.approx(
        0.1 * (on + 0.5 * off), rel=1e-12)


def test_the_views_play_the_same_part():
    z1, z2, _ = make(8, 5, seed=3, grad=False)
    torch.testing.assert_close(barlow_twins(z1, z2), barlow_twins(z2, z1), rtol=1e-12, atol=0)


def test_each_dimension_is_standardised_over_the_batch():
    """With eps 0 the loss ignores a positive scale and a shift of any column of either view."""
    z1, z2, _ = make(10, 4, seed=4, grad=False)
    scale, shift = torch.tensor([0.1, 3.0, 7.0, 1.0], dtype=F64), torch.arange(4.0, dtype=F64)
    moved = barlow_twins(z1 * scale + shift, z2 * scale.flip(0) - shift, eps=0.0)
    torch.testing.assert_close(moved, barlow_twins(z1, z2, eps=0.0), rtol=1e-10, atol=0)


def test_identical_decorrelated_views_give_zero_and_a_collapse_gives_d():
    """C = I exactly: the loss is 0; a constant embedding standardises to zeros: C = 0, the
    loss is d (what BarlowTwins.collapse_loss states)."""
    basis = torch.cat([torch.ones(12, 1, dtype=F64), torch.randn(12, 5, dtype=F64)], dim=1)
    z = torch.linalg.qr(basis)[0][:, 1:]  # orthonormal columns orthogonal to 1: centred
    assert float(barlow_twins(z, z, eps=0.0)) == pytest.approx(0.0, abs=1e-12)
    constant = torch.ones(12, 5, dtype=F64)
    assert float(barlow_twins(constant, constant, scale_loss=0.5)) == pytest.approx(2.5)


def test_module_form_and_bad_input():
    z1, z2, _ = make(5, 3, seed=5, grad=False)
    module = BarlowTwinsLoss(lambd=0.01, scale_loss=0.2)
    assert float(module(z1, z2)) == float(barlow_twins(z1, z2, lambd=0.01, scale_loss=0.2))
    with pytest.raises(ValueError, match="z1 has batch size 1"):
        barlow_twins(z1[:1], z2[:1])
    with pytest.raises(ValueError, match="lambd"):
        barlow_twins(z1, z2, lambd=-1.0)
    with pytest.raises(ValueError, match="scale_loss"):
        BarlowTwinsLoss(scale_loss=0.0)
    with pytest.raises(ValueError, match="same shape"):
        barlow_twins(z1, z2[:, :2])
    bad = z2.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="z2 contains NaN"):
        barlow_twins(z1, bad)
