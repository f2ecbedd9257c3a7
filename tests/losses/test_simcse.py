"""Unsupervised SimCSE loss against a loop written from its equation (float64)."""

from __future__ import annotations

import math

import pytest
import torch

from contrastkit.losses import DySTreSSTemperature, LinearTemperature, PairTemperature, simcse


def brute_force(h, hp, temperature):
    """l_i = -log exp(sim(h_i, h+_i)/t_ii) / sum_j exp(sim(h_i, h+_j)/t_ij), one i at a time,
    with t_ij = temperature(sim(h_i, h+_j)) for a per-pair temperature."""
    positive_t, negative_t = ((temperature.positive, temperature.negative)
                              if isinstance(temperature, PairTemperature)
                              else (temperature, temperature))
    losses = []
    for i in range(h.shape[0]):
        terms = []
        for j in range(hp.shape[0]):
            sim = (h[i] @ hp[j]) / (h[i].norm() * hp[j].norm())
            t = positive_t if i == j else negative_t
            t = t(sim.detach()) if callable(t) else t
            terms.append(sim / t)
        losses.append(-terms[i] + torch.logsumexp(torch.stack(terms), 0))
    return torch.stack(losses).mean()


TEMPERATURES = [
    0.05,
    0.5,
    DySTreSSTemperature(0.03, 0.05),  # DySTreSS Table 12, Alg. 1
    DySTreSSTemperature(0.03, 0.05, shift=-0.2, scale=0.6),  # DySTreSS+
    DySTreSSTemperature(0.05, 0.07, shift=-0.4, scale=0.7),  # DySTreSS*
    DySTreSSTemperature(0.03, 0.05, shift=-0.6, scale=0.8),  # DySTreSS**
    LinearTemperature(0.05, 0.2),
    PairTemperature(0.05, DySTreSSTemperature(0.02, 0.05)),
]


@pytest.mark.parametrize("temperature", TEMPERATURES, ids=repr)
@pytest.mark.parametrize("n", [2, 7])
def test_simcse_equals_its_equation(temperature, n):
    g = torch.Generator().manual_seed(n)
    h = torch.randn(n, 5, dtype=torch.float64, generator=g)
    hp = h + 0.3 * torch.randn(n, 5, dtype=torch.float64, generator=g)
    expected = brute_force(h, hp, temperature)
    torch.testing.assert_close(simcse(h, hp, temperature=temperature), expected,
                               rtol=1e-12, atol=1e-12)


def test_simcse_gradient_matches_the_equation():
    g = torch.Generator().manual_seed(3)
    h = torch.randn(6, 4, dtype=torch.float64, generator=g, requires_grad=True)
    hp = torch.randn(6, 4, dtype=torch.float64, generator=g, requires_grad=True)
    t = DySTreSSTemperature(0.03, 0.05, shift=-0.4, scale=0.7)
    grads = torch.autograd.grad(simcse(h, hp, temperature=t), (h, hp))
    expected = torch.autograd.grad(brute_force(h, hp, t), (h, hp))
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_simcse_is_one_directional():
    """Anchors are the first encodings: swapping the two passes changes the loss."""
    g = torch.Generator().manual_seed(1)
    h = torch.randn(5, 4, dtype=torch.float64, generator=g)
    hp = torch.randn(5, 4, dtype=torch.float64, generator=g)
    assert not math.isclose(simcse(h, hp).item(), simcse(hp, h).item(), rel_tol=1e-6)


def test_identical_encodings_of_orthogonal_sentences():
    """h = h+ = orthonormal rows: l_i = -1/t + log(e^{1/t} + (N-1))."""
    h = torch.eye(4, dtype=torch.float64)
    t = 0.05
    expected = -1 / t + math.log(math.exp(1 / t) + 3)
    assert simcse(h, h, temperature=t).item() == pytest.approx(expected, rel=1e-12)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="temperature"):
        simcse(torch.randn(3, 4), torch.randn(3, 4), temperature=-1.0)
    with pytest.raises(ValueError):
        simcse(torch.randn(1, 4), torch.randn(1, 4))
