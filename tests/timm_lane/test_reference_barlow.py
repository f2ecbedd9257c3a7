"""Barlow Twins and VICReg against lightly 1.6's losses (imported), and against solo-learn's and
the official codes' losses, each re-stated below in this file's own words (read at the commits
named; not copied), on the same random inputs, to float32 tolerance.

* lightly 1.6: ``lightly.loss.BarlowTwinsLoss`` (``F.batch_norm`` of each view, training mode,
  eps 1e-5; no scale) and ``lightly.loss.VICRegLoss`` (the variance terms halved, as the
  official code).
* solo-learn, vturrisi/solo-learn @ 9187ea3: ``solo/losses/barlow.py`` (``barlow_loss_func``:
  a ``BatchNorm1d(D, affine=False)`` on each view, ``C = z1^T z2 / N``, ``(C - I)^2`` with the
  off-diagonal entries times ``lamb``, summed, times ``scale_loss``) and ``solo/losses/vicreg.py``
  (``vicreg_loss_func``: ``F.mse_loss``, the two views' variance hinges summed without halving,
  covariance with N - 1 over D).
* official, facebookresearch/barlowtwins @ 8e8d284, ``main.py`` (``BarlowTwins.forward``: one
  ``BatchNorm1d(affine=False)`` module on both views, ``c = bn(z1).T @ bn(z2) / batch``,
  ``on_diag + lambd * off_diag``) and facebookresearch/vicreg @ 4e12602, ``main_vicreg.py``
  (``VICReg.forward``: ``F.mse_loss``, ``mean(relu(1 - std_x)) / 2 + mean(relu(1 - std_y)) / 2``
  with ``std = sqrt(var + 1e-4)``, covariance ``x^T x / (batch - 1)`` of the centred views, the
  off-diagonal squares summed over the feature count).

Every reference runs in one process here; the distributed forms are checked against one
process in ``tests/methods/test_distributed_barlow_vicreg.py``.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

lightly_loss = pytest.importorskip("lightly.loss", reason="lightly is not installed: run the "
                                   "reference lane (tests/timm_lane) in its own venv")

from contrastkit.losses import barlow_twins, vicreg, vicreg_terms  # noqa: E402

TOL = {"rtol": 1e-5, "atol": 1e-5}


def _views(n: int = 32, d: int = 24, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(n, d, generator=g) * torch.linspace(0.2, 3.0, d) + 0.5
    z2 = z1 + 0.5 * torch.randn(n, d, generator=g)
    return z1.requires_grad_(True), z2.requires_grad_(True)


def _same(ours, theirs, inputs) -> None:
    torch.testing.assert_close(ours, theirs, **TOL)
    for a, b in zip(torch.autograd.grad(ours, inputs, retain_graph=True),
                    torch.autograd.grad(theirs, inputs), strict=True):
        torch.testing.assert_close(a, b, **TOL)


def _off_diagonal_squares(c: torch.Tensor) -> torch.Tensor:
    mask = ~torch.eye(c.shape[0], dtype=torch.bool)
    return c[mask].pow(2).sum()


# --- Barlow Twins -------------------------------------------------------------------------------
def _solo_learn_barlow(z1, z2, lamb, scale_loss):
    """``barlow_loss_func`` in one process (module docstring)."""
    n, d = z1.shape
    bn = nn.BatchNorm1d(d, affine=False)
    corr = bn(z1).T @ bn(z2) / n
    diff = (corr - torch.eye(d)).pow(2)
    weights = torch.where(torch.eye(d, dtype=torch.bool), 1.0, lamb)
    return scale_loss * (diff * weights).sum()


def _official_barlow(z1, z2, lambd):
    """``BarlowTwins.forward`` after the projector, one process (module docstring)."""
    bn = nn.BatchNorm1d(z1.shape[1], affine=False)
    c = bn(z1).T @ bn(z2) / z1.shape[0]
    return (torch.diagonal(c) - 1).pow(2).sum() + lambd * _off_diagonal_squares(c)


@pytest.mark.parametrize("lambd", [0.005, 0.0051, 0.1])
def test_barlow_twins_is_lightlys(lambd):
    z1, z2 = _views()
    theirs = lightly_loss.BarlowTwinsLoss(lambda_param=lambd)(z1, z2)
    _same(barlow_twins(z1, z2, lambd=lambd), theirs, (z1, z2))


@pytest.mark.parametrize("scale_loss", [1.0, 0.1, 0.024])
def test_barlow_twins_is_solo_learns_with_its_scale(scale_loss):
    z1, z2 = _views(seed=1)
    theirs = _solo_learn_barlow(z1, z2, 0.0051, scale_loss)
    _same(barlow_twins(z1, z2, scale_loss=scale_loss), theirs, (z1, z2))


def test_barlow_twins_is_the_official_codes():
    z1, z2 = _views(seed=2)
    _same(barlow_twins(z1, z2, lambd=0.0051), _official_barlow(z1, z2, 0.0051), (z1, z2))


# --- VICReg -------------------------------------------------------------------------------------
def _std_hinge(z):
    return F.relu(1 - torch.sqrt(z.var(dim=0) + 1e-4)).mean()


def _cov_term(z):
    n, d = z.shape
    z = z - z.mean(dim=0)
    return _off_diagonal_squares(z.T @ z / (n - 1)) / d


def _official_vicreg(x, y, sim, std, cov):
    """``VICReg.forward`` after the expander, one process (module docstring)."""
    std_loss = _std_hinge(x) / 2 + _std_hinge(y) / 2
    return sim * F.mse_loss(x, y) + std * std_loss + cov * (_cov_term(x) + _cov_term(y))


def _solo_learn_vicreg(z1, z2, sim, var, cov):
    """``vicreg_loss_func`` in one process: the variance hinges summed (module docstring)."""
    return (sim * F.mse_loss(z1, z2) + var * (_std_hinge(z1) + _std_hinge(z2))
            + cov * (_cov_term(z1) + _cov_term(z2)))


@pytest.mark.parametrize("coeffs", [(25.0, 25.0, 1.0), (1.0, 3.0, 0.5)])
def test_vicreg_is_lightlys_and_the_official_codes(coeffs):
    sim, std, cov = coeffs
    z1, z2 = _views(seed=3)
    ours = vicreg(z1, z2, sim_coeff=sim, std_coeff=std, cov_coeff=cov)
    theirs = lightly_loss.VICRegLoss(lambda_param=sim, mu_param=std, nu_param=cov)(z1, z2)
    _same(ours, theirs, (z1, z2))
    _same(ours, _official_vicreg(z1, z2, sim, std, cov), (z1, z2))


def test_vicreg_without_halving_is_solo_learns():
    z1, z2 = _views(seed=4)
    ours = vicreg(z1, z2, halve_variance=False)
    _same(ours, _solo_learn_vicreg(z1, z2, 25.0, 25.0, 1.0), (z1, z2))
    official = _official_vicreg(z1, z2, 25.0, 25.0, 1.0)
    gap = float((ours - official).detach())  # the variance weight doubled: 25 x the halved
    halved = float(vicreg_terms(z1, z2)["variance"])
    assert halved > 0.01 and gap == pytest.approx(25.0 * halved, rel=1e-4)
