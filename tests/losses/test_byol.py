"""BYOL's regression loss against a loop over the pairs written from eq. 2 (float64)."""

from __future__ import annotations

import pytest
import torch
from loss_inputs import make

from contrastkit.losses import BYOLLoss, byol


def ref_byol(p, z):
    """Eq. 2: the squared distance of the normalised vectors, target constant (eq. 3)."""
    z = z.detach()
    terms = [((p[i] / p[i].norm() - z[i] / z[i].norm()) ** 2).sum() for i in range(p.shape[0])]
    return torch.stack(terms).mean()


@pytest.mark.parametrize("n,d", [(1, 3), (5, 4), (16, 8)])
def test_byol_matches_loop(n, d):
    p, z, _ = make(n, d)
    ours = byol(p, z)
    ref = ref_byol(p, z)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-12)
    g_ours, = torch.autograd.grad(ours, p)
    g_ref, = torch.autograd.grad(ref, p)
    torch.testing.assert_close(g_ours, g_ref, rtol=0, atol=1e-12)


def test_target_gets_no_gradient():
    """The stop-gradient of eq. 3: only the prediction is trained."""
    p, z, _ = make(6, 4)
    byol(p, z).backward()
    assert z.grad is None
    assert p.grad is not None and float(p.grad.abs().sum()) > 0


def test_aligned_pairs_give_zero_and_opposite_pairs_four():
    p, _, _ = make(5, 4, grad=False)
    torch.testing.assert_close(byol(p, 3 * p), torch.tensor(0.0, dtype=p.dtype), atol=1e-12,
                               rtol=0)
    torch.testing.assert_close(byol(p, -p), torch.tensor(4.0, dtype=p.dtype), atol=1e-12, rtol=0)


def test_mean_over_pairs_not_sum():
    p, z, _ = make(5, 4, grad=False)
    torch.testing.assert_close(byol(torch.cat([p, p]), torch.cat([z, z])), byol(p, z))


def test_module_equals_function():
    p, z, _ = make(5, 4, grad=False)
    torch.testing.assert_close(BYOLLoss()(p, z), byol(p, z))


@pytest.mark.parametrize("bad,message", [
    (lambda p, z: byol(p, z[:3]), "same shape"),
    (lambda p, z: byol(p.float(), z), "dtype"),
    (lambda p, z: byol(p[0], z[0]), "2 dimensions"),
    (lambda p, z: byol(p, z.masked_fill(z > 1, float("nan"))), "NaN"),
])
def test_bad_input_names_the_argument(bad, message):
    p, z, _ = make(5, 4, grad=False)
    with pytest.raises(ValueError, match=message):
        bad(p, z)
