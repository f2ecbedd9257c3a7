"""NNCLR's nearest neighbours and loss against loops written from the equations (float64), and
the properties a wrong sign, mean, stop-gradient or symmetrisation would break."""

from __future__ import annotations

import pytest
import torch
from loss_inputs import unit

from contrastkit.losses import nearest_neighbours, nnclr

F64 = torch.float64


def _rows(n: int, d: int, *, seed: int) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=F64)


def ref_neighbours(z, support):
    """argmin over the support rows of ||z/|z| - q/|q|||_2, the row as stored."""
    out = []
    for zi in unit(z):
        distances = [float((zi - q).norm()) for q in unit(support)]
        out.append(support[distances.index(min(distances))])
    return torch.stack(out)


def ref_info_nce(anchors, keys, t):
    """-1/N sum_i log exp(a_i.k_i/t) / sum_k exp(a_i.k_k/t) on unit vectors."""
    a, k = unit(anchors), unit(keys)
    losses = []
    for i in range(a.shape[0]):
        logits = torch.stack([a[i] @ k[j] / t for j in range(k.shape[0])])
        losses.append(-(logits[i] - torch.logsumexp(logits, dim=0)))
    return torch.stack(losses).mean()


def ref_nt_xent(x, y, t):
    """SimCLR over the 2N rows [x; y]: positive of row a is a +- N, the other 2N - 2 negatives."""
    z = unit(torch.cat([x, y]))
    n2 = z.shape[0]
    losses = []
    for a in range(n2):
        p = (a + n2 // 2) % n2
        logits = torch.stack([z[a] @ z[b] / t for b in range(n2) if b != a])
        pos = z[a] @ z[p] / t
        losses.append(-(pos - torch.logsumexp(logits, dim=0)))
    return torch.stack(losses).mean()


def test_nearest_neighbours_match_the_l2_loop():
    z, support = _rows(9, 5, seed=1), 3.0 * _rows(13, 5, seed=2)  # rows of any norm
    got = nearest_neighbours(z, support)
    torch.testing.assert_close(got, ref_neighbours(z, support), rtol=0, atol=0)
    assert not got.requires_grad


def test_a_support_row_equal_to_a_projection_is_its_neighbour():
    support = unit(_rows(10, 4, seed=3))
    got = nearest_neighbours(2.0 * support[[7, 2, 2]].clone().requires_grad_(True), support)
    torch.testing.assert_close(got, support[[7, 2, 2]], rtol=0, atol=0)


@pytest.mark.parametrize("form", ["info_nce", "nt_xent"])
def test_nnclr_matches_the_loop(form):
    nn1, nn2 = _rows(6, 4, seed=4), _rows(6, 4, seed=5)
    p1, p2 = _rows(6, 4, seed=6).requires_grad_(True), _rows(6, 4, seed=7).requires_grad_(True)
    ref = ref_info_nce if form == "info_nce" else ref_nt_xent
    ours = nnclr(nn1, nn2, p1, p2, temperature=0.2, form=form)
    want = 0.5 * (ref(nn1, p2, 0.2) + ref(nn2, p1, 0.2))
    torch.testing.assert_close(ours, want, rtol=0, atol=1e-12)
    for g_ours, g_ref in zip(torch.autograd.grad(ours, [p1, p2]),
                             torch.autograd.grad(want, [p1, p2]), strict=True):
        torch.testing.assert_close(g_ours, g_ref, rtol=0, atol=1e-12)


def test_the_neighbours_take_no_gradient():
    nn1, nn2 = (_rows(5, 4, seed=s).requires_grad_(True) for s in (8, 9))
    p1, p2 = (_rows(5, 4, seed=s).requires_grad_(True) for s in (10, 11))
    nnclr(nn1, nn2, p1, p2).backward()
    assert nn1.grad is None and nn2.grad is None
    assert p1.grad is not None and p2.grad is not None


def test_each_neighbour_meets_the_other_views_predictions():
    """The swap: NN(z^1) against p^2 and NN(z^2) against p^1 (not against its own view's), and
    the loss is the mean of the two directions."""
    nn1, nn2, p1, p2 = (_rows(5, 4, seed=s) for s in (12, 13, 14, 15))
    both = nnclr(nn1, nn2, p1, p2, temperature=0.1)
    torch.testing.assert_close(
        both, 0.5 * (ref_info_nce(nn1, p2, 0.1) + ref_info_nce(nn2, p1, 0.1)), rtol=0,
        atol=1e-12)
    assert not torch.isclose(both, 0.5 * (ref_info_nce(nn1, p1, 0.1)
                                          + ref_info_nce(nn2, p2, 0.1)))
    torch.testing.assert_close(nnclr(nn2, nn1, p2, p1, temperature=0.1), both, rtol=0,
                               atol=1e-14)
    assert both > 0


def test_nnclr_rejects_an_unknown_form_and_mismatched_shapes():
    rows = [_rows(5, 4, seed=s) for s in range(4)]
    with pytest.raises(ValueError, match="form"):
        nnclr(*rows, form="simclr")
    with pytest.raises(ValueError):
        nnclr(rows[0][:4], *rows[1:])


def test_nearest_neighbours_rejects_other_widths():
    with pytest.raises(ValueError, match="support"):
        nearest_neighbours(_rows(3, 4, seed=1), _rows(5, 3, seed=2))
