"""SwAV's Sinkhorn-Knopp codes and swapped-prediction loss against loops written from the
equations (float64), and the properties a wrong sign, mean, stop-gradient or symmetrisation
would break."""

from __future__ import annotations

import math

import pytest
import torch

from contrastkit.losses import sinkhorn_knopp, swav

F64 = torch.float64


def _scores(n: int, k: int, *, seed: int, views: int = 1, dtype=F64) -> list[torch.Tensor]:
    """Cosine-like prototype scores in [-1, 1] (unit projections against unit prototypes)."""
    g = torch.Generator().manual_seed(seed)
    protos = torch.nn.functional.normalize(torch.randn(k, 8, generator=g, dtype=F64), dim=1)
    out = []
    for _ in range(views):
        z = torch.nn.functional.normalize(torch.randn(n, 8, generator=g, dtype=F64), dim=1)
        out.append((z @ protos.t()).to(dtype))
    return out


# ---- brute force, one entry at a time ----------------------------------------------------
def ref_sinkhorn(scores: torch.Tensor, epsilon: float, iterations: int) -> torch.Tensor:
    """Q = exp(S^T / eps) (K x B), scaled to sum 1; per iteration rows to 1/K, columns to 1/B;
    codes = B * Q^T."""
    b, k = scores.shape
    q = [[math.exp(float(scores[i, j]) / epsilon) for i in range(b)] for j in range(k)]
    total = sum(sum(row) for row in q)
    q = [[v / total for v in row] for row in q]
    for _ in range(iterations):
        for j in range(k):
            r = sum(q[j])
            q[j] = [v / r / k for v in q[j]]
        for i in range(b):
            c = sum(q[j][i] for j in range(k))
            for j in range(k):
                q[j][i] = q[j][i] / c / b
    return torch.tensor([[q[j][i] * b for j in range(k)] for i in range(b)], dtype=F64)


def ref_swav(scores, codes, temperature):
    """1/|A| sum_a 1/(V-1) sum_{v != a} 1/N sum_i -sum_k q_a,ik log softmax(s_v,i / t)_k."""
    views, n = len(scores), scores[0].shape[0]
    total = 0.0
    for a, q in enumerate(codes):
        sub = 0.0
        for v in range(views):
            if v == a:
                continue
            for i in range(n):
                logits = scores[v][i] / temperature
                log_p = logits - torch.logsumexp(logits, dim=0)
                sub = sub - (q[i].detach() * log_p).sum() / n
        total = total + sub / (views - 1)
    return total / len(codes)


@pytest.mark.parametrize(("n", "k", "iterations"), [(5, 3, 1), (6, 4, 3), (9, 7, 5)])
def test_sinkhorn_matches_the_loop(n, k, iterations):
    (scores,) = _scores(n, k, seed=n)
    got = sinkhorn_knopp(scores, epsilon=0.05, iterations=iterations)
    torch.testing.assert_close(got, ref_sinkhorn(scores, 0.05, iterations), rtol=1e-12,
                               atol=1e-14)


def test_codes_are_distributions_splitting_the_batch_equally():
    (scores,) = _scores(12, 4, seed=1)
    codes = sinkhorn_knopp(scores, epsilon=0.05, iterations=200)
    torch.testing.assert_close(codes.sum(1), torch.ones(12, dtype=F64), rtol=0, atol=1e-12)
    # the equipartition constraint: every prototype gets B / K of the mass
    torch.testing.assert_close(codes.sum(0), torch.full((4,), 3.0, dtype=F64), rtol=0, atol=1e-9)
    assert not codes.requires_grad


def test_codes_are_the_scaled_exponential_of_eq_5():
    """Q* = Diag(u) exp(C^T Z / eps) Diag(v): log Q - S / eps is a sum of a row and a column
    term, so its double differences vanish."""
    (scores,) = _scores(7, 5, seed=2)
    m = torch.log(sinkhorn_knopp(scores, epsilon=0.1, iterations=3)) - scores / 0.1
    double = m - m[:1] - m[:, :1] + m[:1, :1]
    torch.testing.assert_close(double, torch.zeros_like(double), rtol=0, atol=1e-10)


def test_a_shift_of_a_prototype_changes_nothing_and_nothing_overflows():
    """The first row scaling removes a factor of each prototype's row of exp(S^T / eps): adding
    a constant to one prototype's scores leaves the codes after any number of iterations (a
    sample's constant only at convergence, where eq. 5's scalings absorb both); scores of
    7 +- 1 (exp of up to 160, beyond float32) give the float32 codes of the unshifted ones."""
    (scores,) = _scores(6, 5, seed=3)
    per_prototype = scores + torch.arange(5, dtype=F64)
    torch.testing.assert_close(sinkhorn_knopp(per_prototype, epsilon=0.05),
                               sinkhorn_knopp(scores, epsilon=0.05), rtol=1e-10, atol=1e-12)
    per_sample = scores + 0.01 * torch.arange(6, dtype=F64).unsqueeze(1)
    torch.testing.assert_close(sinkhorn_knopp(per_sample, epsilon=0.05, iterations=2000),
                               sinkhorn_knopp(scores, epsilon=0.05, iterations=2000),
                               rtol=0, atol=1e-8)
    large = sinkhorn_knopp((scores + 7.0).float(), epsilon=0.05)
    torch.testing.assert_close(large, sinkhorn_knopp(scores.float(), epsilon=0.05), rtol=1e-4,
                               atol=1e-6)


def test_sinkhorn_computes_bf16_scores_as_their_float32_cast():
    (scores,) = _scores(8, 6, seed=4, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = sinkhorn_knopp(scores)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, sinkhorn_knopp(scores.float()), rtol=0, atol=0)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"epsilon": 0.0}, "epsilon"), ({"iterations": 0}, "iterations"),
    ({"iterations": 2.0}, "iterations")])
def test_sinkhorn_rejects_bad_settings(kwargs, match):
    (scores,) = _scores(4, 3, seed=5)
    with pytest.raises(ValueError, match=match):
        sinkhorn_knopp(scores, **kwargs)


def test_sinkhorn_rejects_nan_scores():
    (scores,) = _scores(4, 3, seed=5)
    scores[1, 2] = float("nan")
    with pytest.raises(ValueError, match="scores contains NaN"):
        sinkhorn_knopp(scores)


@pytest.mark.parametrize("views", [2, 4])
def test_swav_matches_the_loop(views):
    scores = [s.requires_grad_(True) for s in _scores(6, 5, seed=10, views=views)]
    codes = [sinkhorn_knopp(s) for s in scores[:2]]
    ours = swav(scores, codes, temperature=0.1)
    ref = ref_swav(scores, codes, 0.1)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-12)
    for g_ours, g_ref in zip(torch.autograd.grad(ours, scores), torch.autograd.grad(ref, scores),
                             strict=True):
        torch.testing.assert_close(g_ours, g_ref, rtol=0, atol=1e-12)


def test_codes_take_no_gradient():
    scores = [s.requires_grad_(True) for s in _scores(6, 5, seed=11, views=2)]
    codes = [torch.softmax(s * 3, dim=1) for s in scores]  # codes with a graph to the scores
    swav(scores, codes).backward()
    (plain,) = torch.autograd.grad(
        swav(scores, [q.detach() for q in codes]), scores[:1])
    torch.testing.assert_close(scores[0].grad, plain, rtol=0, atol=1e-14)


def test_swapping_the_views_swaps_the_terms():
    """Two views: 1/2 [l(s2, q1) + l(s1, q2)], each view predicting the other's codes (not its
    own), symmetric in the views."""
    s1, s2 = _scores(6, 5, seed=12, views=2)
    q1, q2 = sinkhorn_knopp(s1), sinkhorn_knopp(s2)

    def ce(s, q):
        return -(q * torch.log_softmax(s / 0.1, dim=1)).sum(1).mean()

    both = swav([s1, s2], [q1, q2])
    torch.testing.assert_close(both, 0.5 * (ce(s2, q1) + ce(s1, q2)), rtol=0, atol=1e-14)
    torch.testing.assert_close(swav([s2, s1], [q2, q1]), both, rtol=0, atol=1e-14)
    assert not torch.isclose(both, 0.5 * (ce(s1, q1) + ce(s2, q2)))


def test_swav_is_a_mean_over_the_batch_and_log_k_at_collapse():
    s1, s2 = _scores(6, 5, seed=13, views=2)
    q1, q2 = sinkhorn_knopp(s1), sinkhorn_knopp(s2)
    twice = swav([torch.cat([s1, s1]), torch.cat([s2, s2])], [torch.cat([q1, q1]),
                                                             torch.cat([q2, q2])])
    torch.testing.assert_close(twice, swav([s1, s2], [q1, q2]), rtol=0, atol=1e-14)
    flat = torch.zeros(6, 5, dtype=F64)
    uniform = torch.full((6, 5), 0.2, dtype=F64)
    torch.testing.assert_close(swav([flat, flat], [uniform, uniform]),
                               torch.tensor(math.log(5), dtype=F64), rtol=0, atol=1e-14)
    assert swav([s1, s2], [q1, q2]) > 0


@pytest.mark.parametrize(("scores", "codes", "match"), [
    (1, 1, "at least 2 views"), (2, 0, "codes must hold"), (2, 3, "codes must hold")])
def test_swav_rejects_bad_view_counts(scores, codes, match):
    s = _scores(4, 3, seed=14, views=3)
    with pytest.raises(ValueError, match=match):
        swav(s[:scores], [sinkhorn_knopp(x) for x in s[:codes]])


def test_swav_rejects_mismatched_shapes_and_bad_temperature():
    s1, s2 = _scores(4, 3, seed=15, views=2)
    with pytest.raises(ValueError, match=r"scores\[1\]"):
        swav([s1, s2[:3]], [sinkhorn_knopp(s1)])
    with pytest.raises(ValueError, match="temperature"):
        swav([s1, s2], [sinkhorn_knopp(s1)], temperature=0.0)
