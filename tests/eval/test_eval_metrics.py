"""Embedding metrics: hand cases and float64 brute-force loops from the equations."""

from __future__ import annotations

import math

import pytest
import torch

import contrastkit.eval.metrics as metrics
from contrastkit.eval import (
    alignment,
    hardness_weights,
    interclass_uniformity,
    local_separation,
    mean_pairwise_similarity,
    sincere_kl_bound,
    target_noise_margin,
    tolerance,
    uniformity,
)


def unit(x):
    return x / x.norm(dim=1, keepdim=True)


def simplex(n):
    """Vertices of a regular simplex on the unit sphere of R^n: cos = -1 / (n - 1)."""
    return unit(torch.eye(n, dtype=torch.float64) - 1.0 / n)


def random_z(n=30, d=5, seed=0):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# ---------------------------------------------------------------- alignment / uniformity
def test_uniformity_antipodal_points():
    z = torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)
    assert float(uniformity(z, t=2.0)) == pytest.approx(math.log(math.exp(-2 * 4)))  # -8


def test_uniformity_regular_simplex_and_identical_points():
    n = 5
    sq_dist = 2 + 2 / (n - 1)  # ||a - b||^2 = 2 - 2 cos, cos = -1/(n-1)
    assert float(uniformity(simplex(n), t=2.0)) == pytest.approx(-2 * sq_dist)
    assert float(uniformity(simplex(n), t=0.5)) == pytest.approx(-0.5 * sq_dist)
    same = torch.ones(4, 3, dtype=torch.float64)
    assert float(uniformity(same)) == pytest.approx(0.0, abs=1e-12)


def test_uniformity_matches_pair_loop_and_chunks(monkeypatch):
    z = random_z(23, 4)
    zn = unit(z)
    terms = [
        math.exp(-2.0 * float((zn[i] - zn[j]).pow(2).sum()))
        for i in range(len(z)) for j in range(i + 1, len(z))
    ]
    ref = math.log(sum(terms) / len(terms))
    assert float(uniformity(z)) == pytest.approx(ref, rel=1e-12, abs=1e-12)
    monkeypatch.setattr(metrics, "_ROW_BUDGET", 50)  # 2 rows per chunk
    assert float(uniformity(z)) == pytest.approx(ref, rel=1e-12, abs=1e-12)
    raw = math.log(sum(
        math.exp(-2.0 * float((z[i] - z[j]).pow(2).sum()))
        for i in range(len(z)) for j in range(i + 1, len(z))
    ) / len(terms))
    assert float(uniformity(z, normalize=False)) == pytest.approx(raw, rel=1e-10)


def test_alignment_hand_cases_and_loop():
    a = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    b = torch.tensor([[-3.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    # normalised: pair 0 antipodal (||.||^2 = 4), pair 1 identical (0)
    assert float(alignment(a, b)) == pytest.approx(2.0)
    assert float(alignment(a, b, alpha=1)) == pytest.approx(1.0)
    assert float(alignment(a, a)) == 0.0
    z1, z2 = random_z(10, 3, 1), random_z(10, 3, 2)
    ref = sum(float((unit(z1)[i] - unit(z2)[i]).norm() ** 2) for i in range(10)) / 10
    assert float(alignment(z1, z2)) == pytest.approx(ref, rel=1e-12)


# ---------------------------------------------------------------- tolerance / inter-class
def test_tolerance_known_cosines():
    z = torch.tensor(
        [[1.0, 0.0], [0.0, 1.0],  # class 0: cos 0
         [2.0, 0.0], [1.0, 0.0], [-1.0, 0.0],  # class 1: cos 1, -1, -1
         [0.3, 0.4]],  # class 2: single sample, no pair
        dtype=torch.float64,
    )
    labels = torch.tensor([0, 0, 1, 1, 1, 2])
    # ordered distinct pairs: class 0: 2 pairs sum 0; class 1: 6 pairs sum 2 * (1 - 1 - 1)
    assert float(tolerance(z, labels)) == pytest.approx(-2.0 / 8.0)


def test_tolerance_matches_pair_loop():
    z, labels = random_z(40, 6, 3), torch.randint(0, 4, (40,), generator=torch.Generator())
    zn = unit(z)
    sims = [float(zn[i] @ zn[j]) for i in range(40) for j in range(40)
            if i != j and labels[i] == labels[j]]
    assert float(tolerance(z, labels)) == pytest.approx(sum(sims) / len(sims), rel=1e-12)


def test_mean_pairwise_similarity_matches_pair_loop_and_flags_a_collapse():
    z = random_z(40, 6, 4)
    zn = unit(z)
    sims = [float(zn[i] @ zn[j]) for i in range(40) for j in range(40) if i != j]
    assert float(mean_pairwise_similarity(z)) == pytest.approx(sum(sims) / len(sims), rel=1e-12)
    assert float(mean_pairwise_similarity(simplex(5))) == pytest.approx(-0.25, rel=1e-12)
    collapsed = 10.0 + 0.1 * z  # every row nearly the same vector
    assert float(mean_pairwise_similarity(collapsed)) > 0.99
    with pytest.raises(ValueError, match="at least 2 samples"):
        mean_pairwise_similarity(z[:1])


def test_interclass_uniformity_hand_case_centroids_not_renormalised():
    z = torch.tensor([[1.0, 0.0], [0.0, 3.0], [-2.0, 0.0], [0.0, -1.0]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1])
    # centroids of normalised rows: (0.5, 0.5) and (-0.5, -0.5): ||mu_0 - mu_1||^2 = 2
    assert float(interclass_uniformity(z, labels)) == pytest.approx(-2.0 * 2.0)
    # re-normalised centroids would be antipodal (-8): the documented choice is not that
    assert float(interclass_uniformity(z, labels)) != pytest.approx(-8.0)


def test_interclass_uniformity_matches_loop():
    z, labels = random_z(50, 4, 4), torch.arange(50) % 5
    zn = unit(z)
    mus = [zn[labels == c].mean(dim=0) for c in range(5)]
    terms = [math.exp(-2 * float((mus[a] - mus[b]).pow(2).sum()))
             for a in range(5) for b in range(a + 1, 5)]
    ref = math.log(sum(terms) / len(terms))
    assert float(interclass_uniformity(z, labels)) == pytest.approx(ref, rel=1e-12)


# ---------------------------------------------------------------- target-noise margin
def angles(*degrees):
    rad = torch.tensor(degrees, dtype=torch.float64) * math.pi / 180
    return torch.stack([rad.cos(), rad.sin()], dim=1)


def test_target_noise_margin_hand_case():
    train = angles(0, 10, 90)
    train_y = torch.tensor([0, 0, 1])
    test = angles(5, 80)
    test_y = torch.tensor([0, 1])
    margin, same, other = target_noise_margin(train, train_y, test, test_y)
    cos = lambda d: math.cos(math.radians(d))  # noqa: E731
    torch.testing.assert_close(same, torch.tensor([cos(5), cos(10)], dtype=torch.float64))
    torch.testing.assert_close(other, torch.tensor([cos(85), cos(70)], dtype=torch.float64))
    expected = (cos(5) + cos(10)) / 2 - (cos(85) + cos(70)) / 2  # medians of two values
    assert margin == pytest.approx(expected)


def test_target_noise_margin_matches_loop(monkeypatch):
    g = torch.Generator().manual_seed(5)
    tr, te = random_z(60, 5, 6), random_z(21, 5, 7)
    ytr, yte = torch.randint(0, 3, (60,), generator=g), torch.randint(0, 3, (21,), generator=g)
    a, b = unit(tr), unit(te)
    same = [max(float(b[q] @ a[i]) for i in range(60) if ytr[i] == yte[q]) for q in range(21)]
    other = [max(float(b[q] @ a[i]) for i in range(60) if ytr[i] != yte[q]) for q in range(21)]
    monkeypatch.setattr(metrics, "_ROW_BUDGET", 130)  # 2 queries per chunk
    margin, s, o = target_noise_margin(tr, ytr, te, yte)
    torch.testing.assert_close(s, torch.tensor(same, dtype=torch.float64))
    torch.testing.assert_close(o, torch.tensor(other, dtype=torch.float64))
    assert margin == pytest.approx(sorted(same)[10] - sorted(other)[10])  # odd count: middle


# ---------------------------------------------------------------- SINCERE bound
def test_sincere_kl_bound():
    assert sincere_kl_bound(1.5, 10) == pytest.approx(math.log(10) - 1.5)
    assert sincere_kl_bound(3.0, 10) < 0
    assert sincere_kl_bound(3.0, 10, clamp=True) == 0.0
    out = sincere_kl_bound(torch.tensor([0.5, 1.0]), torch.tensor([4, 8]))
    torch.testing.assert_close(out, torch.tensor([math.log(4) - 0.5, math.log(8) - 1.0],
                                                 dtype=torch.float64))
    with pytest.raises(ValueError, match="num_noise"):
        sincere_kl_bound(1.0, 0)


# ---------------------------------------------------------------- local separation
def test_local_separation_matches_loop():
    a, p = random_z(12, 4, 8), random_z(12, 4, 9)
    out = local_separation(a, p, k=5)
    an, pn = unit(a), unit(p)
    for i in range(12):
        assert float(out["positive"][i]) == pytest.approx(float(an[i] @ pn[i]))
        negs = sorted((float(an[i] @ v[j]) for v in (an, pn) for j in range(12) if j != i),
                      reverse=True)
        torch.testing.assert_close(out["negatives"][i], torch.tensor(negs[:5], dtype=a.dtype))
    only_p = local_separation(a, p, k=11, negatives="positives")
    negs0 = sorted((float(an[0] @ pn[j]) for j in range(1, 12)), reverse=True)
    torch.testing.assert_close(only_p["negatives"][0], torch.tensor(negs0, dtype=a.dtype))


def test_local_separation_chunks_and_errors(monkeypatch):
    a, p = random_z(9, 3, 10), random_z(9, 3, 11)
    full = local_separation(a, p, k=16)
    monkeypatch.setattr(metrics, "_ROW_BUDGET", 40)
    chunked = local_separation(a, p, k=16)
    torch.testing.assert_close(full["negatives"], chunked["negatives"])
    with pytest.raises(ValueError, match="larger than the 16 negatives"):
        local_separation(a, p, k=17)
    with pytest.raises(ValueError, match="same shape"):
        local_separation(a, p[:5])


# ---------------------------------------------------------------- hardness weights
def test_hardness_weights_formula_and_callable():
    s = torch.tensor([[0.9, 0.1, -0.5], [0.0, 0.0, 0.3]], dtype=torch.float64)
    r = hardness_weights(s, 0.2)
    for i in range(2):
        den = sum(math.exp(float(v) / 0.2) for v in s[i])
        for j in range(3):
            assert float(r[i, j]) == pytest.approx(math.exp(float(s[i, j]) / 0.2) / den)
    torch.testing.assert_close(hardness_weights(s, lambda x: torch.full_like(x, 0.2)), r)
    dyn = lambda x: 0.1 + 0.1 * x.abs()  # noqa: E731
    rd = hardness_weights(s, dyn)
    den = sum(math.exp(float(v) / (0.1 + 0.1 * abs(float(v)))) for v in s[0])
    assert float(rd[0, 0]) == pytest.approx(math.exp(0.9 / 0.19) / den)
    torch.testing.assert_close(rd.sum(dim=1), torch.ones(2, dtype=torch.float64))


def test_hardness_weights_equal_gradient_ratio_of_infonce():
    """DySTreSS eq. 4: r(s_ij) = |dL_i/ds_ij| / |dL_i/ds_ii+| for the InfoNCE loss of eq. 1."""
    t = 0.3
    s_pos = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    s_neg = torch.tensor([0.5, -0.2, 0.1, 0.8], dtype=torch.float64, requires_grad=True)
    logits = torch.cat([s_pos[None], s_neg]) / t
    loss = -(logits[0] - torch.logsumexp(logits, dim=0))
    g_pos, g_neg = torch.autograd.grad(loss, [s_pos, s_neg])
    torch.testing.assert_close(g_neg.abs() / g_pos.abs(), hardness_weights(s_neg.detach(), t))


def test_hardness_weights_bad_temperature():
    s = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="temperature"):
        hardness_weights(s, 0.0)
    with pytest.raises(ValueError, match="temperature callable"):
        hardness_weights(s, lambda x: -torch.ones_like(x))


# ---------------------------------------------------------------- bad input
def test_metric_bad_inputs():
    z = random_z(6, 3)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    with pytest.raises(ValueError, match="labels has 5 labels"):
        tolerance(z, y[:5])
    with pytest.raises(ValueError, match="empty class"):
        interclass_uniformity(z, y, num_classes=4)
    bad = z.clone()
    bad[1, 1] = float("nan")
    with pytest.raises(ValueError, match="z contains NaN"):
        uniformity(bad)
    with pytest.raises(ValueError, match="no class with 2"):
        tolerance(z, torch.arange(6))
    with pytest.raises(ValueError, match="absent from train_labels"):
        target_noise_margin(z, y, z, y + 1)
    with pytest.raises(ValueError, match="single class"):
        target_noise_margin(z, torch.zeros(6, dtype=torch.long), z, y)
    with pytest.raises(ValueError, match="same shape"):
        alignment(z, z[:4])
