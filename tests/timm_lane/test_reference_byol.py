"""BYOL, MoCo v3, W-MSE and DCLW against outside references (issue 53).

lightly 1.6 (imported; ``make test-timm``'s venv has it, ``.venv`` does not and skips those
tests): ``lightly.loss.DCLWLoss``, ``WMSELoss``, ``NegativeCosineSimilarity`` and
``lightly.models.utils.update_momentum``. lightly has no MoCo v3 loss.

The official codes and solo-learn, re-stated below in this file's own words as small functions
(read at the commits named; not copied), run in both venvs:

* BYOL, deepmind-research (google-deepmind/deepmind-research @ 4822a45)
  ``byol/utils/helpers.py`` (``regression_loss``, ``l2_normalize``) and
  ``byol/byol_experiment.py`` (``loss_fn``: the two directions summed, the target under
  ``stop_gradient``);
* MoCo v3, facebookresearch/moco-v3 @ c349e6e ``moco/builder.py``
  (``MoCo.contrastive_loss``: keys gathered, labels offset by rank, times ``2 T``);
* W-MSE, htdt/self-supervised @ d9662c8 ``methods/w_mse.py``, ``methods/whitening.py``,
  ``methods/norm_mse.py``;
* solo-learn, vturrisi/solo-learn @ 9187ea3 ``solo/losses/byol.py``,
  ``solo/losses/mocov3.py``, ``solo/losses/wmse.py`` (``simplified=True``: the second view
  detached).

Known differences, shown by the tests: lightly's BYOL benchmark averages the two directions of
``-cos`` (a quarter of the official loss's gradient; the lightly config rescales lr and weight
decay for it); lightly's DCLW with ``gather_distributed`` normalises its weights over each
process's batch (contrastkit over the gathered batch; equal on one process).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from contrastkit.losses import byol, dclw, moco_v3, wmse
from contrastkit.losses.wmse import draw_sub_batches

F64 = torch.float64


def _lightly(module: str):
    return pytest.importorskip(module, reason="lightly is not installed: run make test-timm")


def _inputs(n: int, d: int, seed: int, dtype=F64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(n, d, generator=g, dtype=F64)
    b = a + 0.8 * torch.randn(n, d, generator=g, dtype=F64)
    return a.to(dtype).requires_grad_(), b.to(dtype).requires_grad_()


def _grads(loss, inputs):
    return torch.autograd.grad(loss, inputs, allow_unused=True)


def _same(ours, theirs, inputs, tol):
    torch.testing.assert_close(ours, theirs.to(ours.dtype), rtol=tol, atol=tol)
    for g_ours, g_theirs in zip(_grads(ours, inputs), _grads(theirs, inputs), strict=True):
        if g_ours is None or g_theirs is None:  # no gradient: None, or zeros on one side
            assert all(g is None or float(g.abs().max()) == 0.0 for g in (g_ours, g_theirs))
        else:
            torch.testing.assert_close(g_ours, g_theirs, rtol=tol, atol=tol)


# --- the official codes and solo-learn, re-stated ----------------------------------------------
def _deepmind_regression_loss(x, y):
    """``regression_loss``: squared distance of vectors scaled by rsqrt(max(|v|^2, 1e-12))."""
    def unit(v):
        return v * torch.rsqrt(torch.clamp((v * v).sum(-1, keepdim=True), min=1e-12))
    return ((unit(x) - unit(y)) ** 2).sum(-1)


def _deepmind_byol_loss(p1, p2, z1, z2):
    """``loss_fn``'s representation loss: both directions summed per sample, then the mean."""
    return (_deepmind_regression_loss(p1, z2.detach())
            + _deepmind_regression_loss(p2, z1.detach())).mean()


def _solo_byol(p, z):
    """``byol_loss_func(p, z, simplified=True)``."""
    return 2 - 2 * F.cosine_similarity(p, z.detach(), dim=-1).mean()


def _moco_v3_code(q, k_gathered, temperature, rank, world):
    """``contrastive_loss`` on one rank: its queries against every rank's keys."""
    n = q.shape[0]
    q, k = F.normalize(q, dim=1), F.normalize(k_gathered, dim=1)
    logits = q @ k.T / temperature
    labels = torch.arange(n) + n * rank
    assert k.shape[0] == n * world
    return F.cross_entropy(logits, labels) * (2 * temperature)


def _official_whitening(x, eps=0.0):
    """``Whitening2d.forward`` in training: mean, covariance / (w - 1), shrinkage, inverse
    Cholesky factor by a triangular solve against the identity, then the (1x1 convolution)
    product."""
    mean = x.mean(0, keepdim=True)
    centred = x - mean
    cov = centred.T @ centred / (x.shape[0] - 1)
    eye = torch.eye(x.shape[1], dtype=x.dtype)
    cov = (1 - eps) * cov + eps * eye
    inverse = torch.linalg.solve_triangular(torch.linalg.cholesky(cov), eye, upper=False)
    return centred @ inverse.T


def _official_wmse(h1, h2, w_size, w_iter, eps=0.0, simplified=False):
    """``WMSE.forward`` for two views (``num_samples`` 2, one pair), ``norm_mse_loss``; with
    ``simplified`` solo-learn's ``wmse_loss_func`` default (the second view detached)."""
    bs = h1.shape[0]
    h = torch.cat([h1, h2])
    loss = 0
    for _ in range(w_iter):
        z = torch.empty_like(h)
        perm = torch.randperm(bs).view(-1, w_size)
        for idx in perm:
            for i in range(2):
                z[idx + i * bs] = _official_whitening(h[idx + i * bs], eps)
        x0, x1 = z[:bs], z[bs:]
        if simplified:
            loss = loss + 2 - 2 * F.cosine_similarity(x0, x1.detach(), dim=-1).mean()
        else:
            loss = loss + 2 - 2 * (F.normalize(x0) * F.normalize(x1)).sum(-1).mean()
    return loss / w_iter


# --- BYOL ----------------------------------------------------------------------------------------
def test_byol_is_the_official_loss_and_solo_learns():
    p1, z2 = _inputs(16, 8, seed=0)
    p2, z1 = _inputs(16, 8, seed=1)
    inputs = (p1, p2, z1, z2)
    _same(byol(p1, z2) + byol(p2, z1), _deepmind_byol_loss(*inputs), inputs, 1e-12)
    _same(byol(p1, z2), _solo_byol(p1, z2), (p1, z2), 1e-12)


def test_byol_is_four_times_lightlys_benchmark_loss_plus_four():
    """lightly's ``BYOLModel``: ``0.5 * (ncs(p0, z1) + ncs(p1, z0))`` with ``ncs = -cos``."""
    loss = _lightly("lightly.loss")
    p1, z2 = _inputs(16, 8, seed=2, dtype=torch.float32)
    p2, z1 = _inputs(16, 8, seed=3, dtype=torch.float32)
    ncs = loss.NegativeCosineSimilarity()
    theirs = 0.5 * (ncs(p1, z2.detach()) + ncs(p2, z1.detach()))
    ours = byol(p1, z2) + byol(p2, z1)
    torch.testing.assert_close(ours, 4 * theirs + 4, rtol=1e-6, atol=1e-6)
    for g_ours, g_theirs in zip(_grads(ours, (p1, p2)), _grads(theirs, (p1, p2)), strict=True):
        torch.testing.assert_close(g_ours, 4 * g_theirs, rtol=1e-5, atol=1e-6)


def test_constant_momentum_is_lightlys_update_momentum():
    """lightly's benchmark: ``update_momentum(model, model_ema, m=0.99)`` at every step."""
    utils = _lightly("lightly.models.utils")
    from contrastkit.methods import BYOL
    from contrastkit.models.factory import BackboneSpec, HeadSpec
    from contrastkit.schedules import ScheduleState

    torch.manual_seed(0)
    head = HeadSpec(8, 6)
    method = BYOL(backbone=BackboneSpec(name="small_convnet", width=4, out_dim=8),
                  projector=head, predictor=head, momentum=0.99, momentum_schedule="constant")
    online = torch.nn.Sequential(method.backbone, method.projector)
    ema = copy.deepcopy(method.target.target)
    for step in range(3):
        with torch.no_grad():
            for p in online.parameters():
                p.add_(0.1 * (step + 1))
        method.after_optimizer_step(ScheduleState(step=step, total_steps=3))
        utils.update_momentum(online, ema, m=0.99)
    for ours, theirs in zip(method.target.target.parameters(), ema.parameters(), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)


# --- MoCo v3 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("temperature", [1.0, 0.2])
@pytest.mark.parametrize("rank", [0, 1, 2])
def test_moco_v3_is_the_official_contrastive_loss_on_every_rank(temperature, rank):
    """Three ranks of 4: this rank's queries against the 12 gathered keys. solo-learn's
    ``mocov3_loss_func`` takes the same steps (normalise, gather the keys, logits over tau,
    labels offset by the rank, times 2 tau): this re-statement stands for both."""
    q, _ = _inputs(4, 8, seed=4 + rank)
    keys, _ = _inputs(12, 8, seed=9)
    theirs = _moco_v3_code(q, keys, temperature, rank, 3)
    ours = moco_v3(q, keys, temperature=temperature, key_offset=4 * rank)
    _same(ours, theirs, (q, keys), 1e-12)


# --- W-MSE ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("w_size,w_iter,eps", [(32, 1, 0.0), (16, 2, 0.0), (8, 3, 0.1)])
@pytest.mark.parametrize("simplified", [False, True])
def test_wmse_is_the_official_code_and_solo_learns(w_size, w_iter, eps, simplified):
    """Same draws of the sub-batches (the global generator, seeded alike); ``simplified``:
    solo-learn's detached second view."""
    z1, z2 = _inputs(32, 4, seed=10)
    torch.manual_seed(5)
    theirs = _official_wmse(z1, z2, w_size, w_iter, eps, simplified)
    torch.manual_seed(5)
    ours = wmse(z1, z2, w_size=w_size, w_iter=w_iter, eps=eps, detach_second=simplified)
    _same(ours, theirs, (z1, z2), 1e-10)


@pytest.mark.parametrize("dtype,tol", [(F64, 1e-10), (torch.float32, 2e-5)])
def test_wmse_is_lightlys_wmse_loss(dtype, tol):
    loss = _lightly("lightly.loss")
    z1, z2 = _inputs(64, 8, seed=11, dtype=dtype)
    criterion = loss.WMSELoss(embedding_dim=8, w_size=16, w_iter=2).to(dtype)
    torch.manual_seed(6)
    theirs = criterion(torch.cat([z1, z2]))
    torch.manual_seed(6)
    ours = wmse(z1, z2, w_size=16, w_iter=2)
    _same(ours, theirs, (z1, z2), tol)
    # the same partitions, drawn by draw_sub_batches
    torch.manual_seed(6)
    rows = draw_sub_batches(64, 16, 2)
    torch.testing.assert_close(wmse(z1, z2, w_size=16, w_iter=2, sub_batches=rows), ours)


def test_lightly_refuses_what_the_rank_condition_allows():
    """lightly asks w_size >= 2 * dim; contrastkit only the rank condition w_size > dim."""
    loss = _lightly("lightly.loss")
    with pytest.raises(ValueError, match="w_size should be at least twice"):
        loss.WMSELoss(embedding_dim=8, w_size=12)
    z1, z2 = _inputs(24, 8, seed=12)
    assert torch.isfinite(wmse(z1, z2, w_size=12))


# --- DCLW ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("temperature,sigma", [(0.1, 0.5), (0.2, 0.1), (0.5, 1.0)])
@pytest.mark.parametrize("dtype,tol", [(F64, 1e-10), (torch.float32, 1e-5)])
def test_dclw_is_lightlys_dclw_loss(temperature, sigma, dtype, tol):
    loss = _lightly("lightly.loss")
    z1, z2 = _inputs(32, 16, seed=13, dtype=dtype)
    theirs = loss.DCLWLoss(temperature=temperature, sigma=sigma)(z1, z2)
    ours = dclw(z1, z2, temperature=temperature, sigma=sigma)
    _same(ours, theirs, (z1, z2), tol)
