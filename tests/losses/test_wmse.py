"""W-MSE against loops over the sub-batches and rows written from the paper's whitening and
loss (float64): covariance by sums of outer products, the whitening matrix by an explicit
inverse of the Cholesky factor, the squared distance of the normalised whitened vectors."""

from __future__ import annotations

import pytest
import torch
from loss_inputs import F64

from contrastkit.hot_path import hot_path
from contrastkit.losses import WMSELoss, wmse
from contrastkit.losses.wmse import draw_sub_batches


def pairs(n, d, seed=0, grad=True):
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(n, d, generator=g, dtype=F64)
    z2 = z1 + 0.7 * torch.randn(n, d, generator=g, dtype=F64)
    return z1.requires_grad_(grad), z2.requires_grad_(grad)


def ref_whiten(v, eps):
    """W (v_i - mu) for each row, W = L^{-1}, (1 - eps) Sigma + eps I = L L^T."""
    w, d = v.shape
    mu = sum(v[i] for i in range(w)) / w
    cov = sum(torch.outer(v[i] - mu, v[i] - mu) for i in range(w)) / (w - 1)
    cov = (1 - eps) * cov + eps * torch.eye(d, dtype=v.dtype)
    inverse = torch.linalg.inv(torch.linalg.cholesky(cov))
    return torch.stack([inverse @ (v[i] - mu) for i in range(w)])


def ref_wmse(z1, z2, sub_batches, eps=0.0, detach_second=False):
    per_iteration = []
    for partition in sub_batches:
        terms = []
        for rows in partition:
            a, b = ref_whiten(z1[rows], eps), ref_whiten(z2[rows], eps)
            b = b.detach() if detach_second else b
            for i in range(len(rows)):
                terms.append(((a[i] / a[i].norm() - b[i] / b[i].norm()) ** 2).sum())
        per_iteration.append(torch.stack(terms).mean())
    return torch.stack(per_iteration).mean()


def fixed_partitions(n, w_size, w_iter, seed=0):
    return draw_sub_batches(n, w_size, w_iter, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("n,d,w_size,w_iter", [(8, 3, 8, 1), (12, 3, 6, 1), (16, 4, 8, 3),
                                               (20, 2, 5, 2)])
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("detach_second", [False, True])
def test_wmse_matches_loop(n, d, w_size, w_iter, eps, detach_second):
    z1, z2 = pairs(n, d)
    rows = fixed_partitions(n, w_size, w_iter)
    ours = wmse(z1, z2, w_size=w_size, w_iter=w_iter, eps=eps, detach_second=detach_second,
                sub_batches=rows)
    ref = ref_wmse(z1, z2, rows, eps, detach_second)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-10)
    g_ours = torch.autograd.grad(ours, (z1, z2), allow_unused=True)
    g_ref = torch.autograd.grad(ref, (z1, z2), allow_unused=True)
    torch.testing.assert_close(g_ours[0], g_ref[0], rtol=0, atol=1e-9)
    if detach_second:  # solo-learn's simplified form: the second view gets no gradient
        assert g_ours[1] is None and g_ref[1] is None
    else:
        torch.testing.assert_close(g_ours[1], g_ref[1], rtol=0, atol=1e-9)
        assert float(g_ours[1].abs().sum()) > 0


def test_detaching_the_second_view_keeps_the_value_and_changes_the_first_gradient():
    z1, z2 = pairs(12, 3, seed=1)
    rows = fixed_partitions(12, 6, 1)
    official = wmse(z1, z2, w_size=6, sub_batches=rows)
    simplified = wmse(z1, z2, w_size=6, sub_batches=rows, detach_second=True)
    torch.testing.assert_close(official, simplified, rtol=0, atol=1e-14)
    g_official = torch.autograd.grad(official, z1)[0]
    g_simplified = torch.autograd.grad(simplified, z1)[0]
    # the loss is symmetric in the views but not its split of the gradient: view 1's share
    # is the same (its whitening does not involve view 2), view 2's is dropped
    torch.testing.assert_close(g_official, g_simplified, rtol=0, atol=1e-12)


def test_whitened_sub_batches_have_identity_covariance():
    from contrastkit.losses.wmse import _whiten

    v = torch.randn(3, 10, 4, dtype=F64, generator=torch.Generator().manual_seed(2))
    z = _whiten(v, 0.0)
    for batch in z:
        torch.testing.assert_close(batch.mean(0), torch.zeros(4, dtype=F64), atol=1e-12, rtol=0)
        torch.testing.assert_close(batch.T @ batch / 9, torch.eye(4, dtype=F64), atol=1e-10,
                                   rtol=0)


def test_one_sub_batch_does_not_depend_on_the_row_order():
    z1, z2 = pairs(10, 3, seed=3, grad=False)
    a = wmse(z1, z2, sub_batches=fixed_partitions(10, 10, 1, seed=0))
    b = wmse(z1, z2, sub_batches=fixed_partitions(10, 10, 1, seed=1))
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    # two sub-batches: the partition matters (each is whitened with its own statistics)
    c = wmse(z1, z2, w_size=5, sub_batches=fixed_partitions(10, 5, 1, seed=0))
    d = wmse(z1, z2, w_size=5, sub_batches=fixed_partitions(10, 5, 1, seed=1))
    assert not torch.isclose(c, d, rtol=1e-6)


def test_aligned_views_give_zero():
    z1, _ = pairs(8, 3, grad=False)
    torch.testing.assert_close(wmse(z1, 2 * z1 + 1), torch.tensor(0.0, dtype=F64), atol=1e-10,
                               rtol=0)


def test_module_equals_function():
    z1, z2 = pairs(8, 3, grad=False)
    torch.manual_seed(0)
    module = WMSELoss(w_size=4, w_iter=2)(z1, z2)
    torch.manual_seed(0)
    torch.testing.assert_close(module, wmse(z1, z2, w_size=4, w_iter=2))


@pytest.mark.parametrize("kwargs,message", [
    ({"w_size": 5}, "w_size 5 must divide the batch of 8"),
    ({"w_size": 2}, "w_size 2 must exceed the embedding dimension 3"),
    ({"w_size": 0}, "w_size must be a positive int"),
    ({"w_iter": 0}, "w_iter must be a positive int"),
    ({"eps": 1.5}, "eps must lie in"),
    ({"sub_batches": torch.zeros(1, 2, 4, dtype=torch.long), "w_size": 4},
     "each iteration must be a permutation"),
    ({"sub_batches": torch.zeros(1, 8, dtype=torch.long)}, "sub_batches must be an int64"),
])
def test_bad_arguments_are_named(kwargs, message):
    z1, z2 = pairs(8, 3, grad=False)
    with pytest.raises(ValueError, match=message):
        wmse(z1, z2, **kwargs)


def test_a_singular_covariance_is_a_clear_error_and_nan_in_the_training_step():
    z1, z2 = pairs(8, 3, grad=False)
    flat = z1.clone()
    flat[:, 2] = 1.0  # a constant coordinate: zero variance, not positive definite
    with pytest.raises(ValueError, match="not positive definite"):
        wmse(flat, z2)
    with hot_path():  # no host read there: the loss becomes NaN for the engine to report
        assert torch.isnan(wmse(flat, z2))
