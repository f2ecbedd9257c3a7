"""DINO's loss against a loop written from its equations (float64), and the properties a wrong
sign, mean, stop-gradient, centring or pairing would break."""

from __future__ import annotations

import math

import pytest
import torch

from contrastkit.losses import dino

F64 = torch.float64


def _outputs(n: int, k: int, views: int, *, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, k, generator=g, dtype=F64) for _ in range(views)]


def ref_dino(student, teacher, center, ts, tt):
    """1/T sum_t sum_{s != t} 1/N sum_i -sum_k P_t,ik log P_s,ik, P_t = softmax((g_t - c)/tt),
    P_s = softmax(g_s / ts)."""
    terms = []
    for t, g_t in enumerate(teacher):
        for s, g_s in enumerate(student):
            if s == t:
                continue
            per_sample = []
            for i in range(g_t.shape[0]):
                logits_t = [(float(g_t[i, k]) - float(center[k])) / tt for k in range(g_t.shape[1])]
                top = max(logits_t)
                norm = sum(math.exp(v - top) for v in logits_t)
                p_t = torch.tensor([math.exp(v - top) / norm for v in logits_t], dtype=F64)
                log_p_s = g_s[i] / ts - torch.logsumexp(g_s[i] / ts, dim=0)
                per_sample.append(-(p_t * log_p_s).sum())
            terms.append(torch.stack(per_sample).mean())
    return torch.stack(terms).mean()


@pytest.mark.parametrize(("views", "teachers"), [(2, 2), (4, 2), (3, 1)])
def test_dino_matches_the_loop(views, teachers):
    student = [g.requires_grad_(True) for g in _outputs(5, 7, views, seed=views)]
    teacher = _outputs(5, 7, teachers, seed=10 + views)
    center = 0.3 * torch.randn(7, generator=torch.Generator().manual_seed(1), dtype=F64)
    ours = dino(student, teacher, center, student_temperature=0.1, teacher_temperature=0.04)
    ref = ref_dino(student, teacher, center, 0.1, 0.04)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-11)
    for g_ours, g_ref in zip(torch.autograd.grad(ours, student, allow_unused=True),
                             torch.autograd.grad(ref, student, allow_unused=True), strict=True):
        assert (g_ours is None) == (g_ref is None)  # one teacher: student view 0 is unused
        if g_ref is not None:
            torch.testing.assert_close(g_ours, g_ref, rtol=0, atol=1e-11)


def test_teacher_and_center_take_no_gradient():
    student = _outputs(4, 6, 2, seed=1)
    teacher = [g.requires_grad_(True) for g in _outputs(4, 6, 2, seed=2)]
    center = torch.zeros(1, 6, dtype=F64, requires_grad=True)
    loss = dino([s.requires_grad_(True) for s in student], teacher, center)
    loss.backward()
    assert all(t.grad is None for t in teacher) and center.grad is None
    assert all(s.grad is not None for s in student)


def test_the_centre_is_subtracted_from_the_teacher_only():
    """A centre equal to the teacher's own output of one class raises that class's target mass
    elsewhere: the loss changes; a constant centre (same for every output) changes nothing
    (softmax is shift invariant); subtracting from the student would not be."""
    student, teacher = _outputs(4, 6, 2, seed=3), _outputs(4, 6, 2, seed=4)
    zero = torch.zeros(6, dtype=F64)
    base = dino(student, teacher, zero)
    torch.testing.assert_close(dino(student, teacher, zero + 5.0), base, rtol=0, atol=1e-12)
    center = torch.tensor([2.0, 0, 0, 0, 0, 0], dtype=F64)
    shifted_teacher = [g - center for g in teacher]
    torch.testing.assert_close(dino(student, teacher, center), dino(student, shifted_teacher, zero),
                               rtol=0, atol=1e-12)
    assert not torch.isclose(dino(student, teacher, center), base)


def test_a_view_is_never_paired_with_itself():
    """Two views: the mean of the terms (teacher 0, student 1) and (teacher 1, student 0); the
    pairs (0, 0) and (1, 1) are not in it."""
    (s0, s1), (t0, t1) = _outputs(4, 6, 2, seed=5), _outputs(4, 6, 2, seed=6)
    zero = torch.zeros(6, dtype=F64)
    t0_s1 = dino([s0, s1], [t0], zero)  # teacher view 0 skips student view 0
    t1_s0 = dino([s1, s0], [t1], zero)
    both = dino([s0, s1], [t0, t1], zero)
    torch.testing.assert_close(both, 0.5 * (t0_s1 + t1_s0), rtol=0, atol=1e-12)
    same_view = 0.5 * (dino([s1, s0], [t0], zero) + dino([s0, s1], [t1], zero))
    assert not torch.isclose(both, same_view)


def test_sharpening_and_mean_over_the_batch():
    student, teacher = _outputs(4, 6, 2, seed=7), _outputs(4, 6, 2, seed=8)
    zero = torch.zeros(6, dtype=F64)
    doubled = dino([torch.cat([s, s]) for s in student], [torch.cat([t, t]) for t in teacher],
                   zero)
    torch.testing.assert_close(doubled, dino(student, teacher, zero), rtol=0, atol=1e-12)
    # a flat teacher (very high temperature) gives uniform targets: the cross-entropy against
    # a flat student is log K
    flat = [torch.zeros(4, 6, dtype=F64)] * 2
    torch.testing.assert_close(dino(flat, teacher, zero, teacher_temperature=1e9),
                               torch.tensor(math.log(6), dtype=F64), rtol=0, atol=1e-9)
    assert dino(student, teacher, zero) > 0


def test_dino_computes_in_float32_under_bf16_autocast():
    student = [g.float().requires_grad_(True) for g in _outputs(4, 6, 2, seed=9)]
    teacher = [g.bfloat16() for g in _outputs(4, 6, 2, seed=10)]
    center = torch.zeros(1, 6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = dino(student, teacher, center)
    want = dino(student, [t.float() for t in teacher], center)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize(("student", "teacher", "match"), [
    (1, 1, "at least 2 views"), (2, 0, "teacher must hold"), (2, 3, "teacher must hold")])
def test_dino_rejects_bad_view_counts(student, teacher, match):
    outs = _outputs(4, 6, 3, seed=11)
    with pytest.raises(ValueError, match=match):
        dino(outs[:student], outs[:teacher], torch.zeros(6, dtype=F64))


def test_dino_rejects_a_centre_of_another_size_and_bad_temperatures():
    outs = _outputs(4, 6, 2, seed=12)
    with pytest.raises(ValueError, match="center must have shape"):
        dino(outs, outs, torch.zeros(5, dtype=F64))
    with pytest.raises(ValueError, match="teacher_temperature"):
        dino(outs, outs, torch.zeros(6, dtype=F64), teacher_temperature=-1.0)
