"""ReSSL, SCE and SCE Proposition 1 against per-anchor loops of Denize et al. 2023, eqs. 3-11."""

from __future__ import annotations

import math

import pytest
import torch
from loss_inputs import F64, SHAPES, make, unit

from contrastkit.losses.infonce import info_nce
from contrastkit.losses.sce import RESSLLoss, SCELoss, ressl, sce, sce_reference, sce_terms


def negatives_of(i, k, neg):
    """In-batch: the other keys (the 1_{i != k} of eqs. 4-5); else the queue rows."""
    return [k[j] for j in range(k.shape[0]) if j != i] if neg is None else list(neg)


def softmax_list(logits):
    exps = [torch.exp(x) for x in logits]
    total = sum(exps)
    return [e / total for e in exps]


def ref_terms(q, k, neg, t, tm, coeff):
    """Per-anchor loops: (SCE eq. 10, InfoNCE eq. 3, ReSSL eq. 6, Ceil of Prop. 1)."""
    q, k = unit(q), unit(k)
    neg = None if neg is None else unit(neg)
    sce_l, nce_l, ressl_l, ceil_l = [], [], [], []
    for i in range(q.shape[0]):
        negs = negatives_of(i, k, neg)
        s2 = softmax_list([k[i].detach() @ c.detach() / tm for c in negs])  # eq. 5, no grad
        s1 = softmax_list([q[i] @ c / t for c in negs])  # eq. 4
        cands = [k[i], *negs]  # positive first
        p1 = softmax_list([q[i] @ c / t for c in cands])  # eq. 9
        w2 = [coeff] + [(1 - coeff) * s for s in s2]  # eq. 8, positive masked out of s2
        sce_l.append(-sum(w * torch.log(p) for w, p in zip(w2, p1, strict=True)))
        nce_l.append(-torch.log(p1[0]))
        ressl_l.append(-sum(a * torch.log(b) for a, b in zip(s2, s1, strict=True)))
        with_pos = sum(torch.exp(q[i] @ c / t) for c in cands)
        without_pos = sum(torch.exp(q[i] @ c / t) for c in negs)
        ceil_l.append(-sum(s2) * torch.log(without_pos / with_pos))
    return [torch.stack(v).mean() for v in (sce_l, nce_l, ressl_l, ceil_l)]


def close(a, b):
    torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def grads(loss, tensors):
    tensors = [t for t in tensors if t is not None]
    return torch.autograd.grad(loss, tensors, allow_unused=True)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("coeff", [0.0, 0.3, 0.5, 1.0])
def test_sce_matches_loop_value_and_gradient(shape, coeff):
    q, k, neg = make(*shape)
    ours = sce(q, k, neg, temperature=0.1, target_temperature=0.05, coeff=coeff)
    ref = ref_terms(q, k, neg, 0.1, 0.05, coeff)[0]
    close(ours, ref)
    # the loop detaches the target, so equal gradients = no gradient through the target
    for g_ours, g_ref in zip(grads(ours, [q, k, neg]), grads(ref, [q, k, neg]), strict=True):
        close(g_ours, g_ref)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("coeff", [0.0, 0.3, 1.0])
def test_sce_reference_is_eq_10_and_equals_the_fast_path(shape, coeff):
    """The paper form (eqs. 8-10 in matrices) matches the per-anchor loop and the fast line."""
    q, k, neg = make(*shape, seed=6)
    paper = sce_reference(q, k, neg, temperature=0.1, target_temperature=0.05, coeff=coeff)
    close(paper, ref_terms(q, k, neg, 0.1, 0.05, coeff)[0])
    fast = sce(q, k, neg, temperature=0.1, target_temperature=0.05, coeff=coeff)
    close(fast, paper)
    for g_fast, g_paper in zip(grads(fast, [q, k, neg]), grads(paper, [q, k, neg]), strict=True):
        if g_paper is None:  # the queue only enters the stop-gradient target when coeff is 1
            assert g_fast is None or g_fast.abs().max() == 0
        else:
            close(g_fast, g_paper)


@pytest.mark.parametrize("shape", SHAPES)
def test_ressl_matches_loop_value_and_gradient(shape):
    q, k, neg = make(*shape, seed=1)
    ours = ressl(q, k, neg, temperature=0.2, target_temperature=0.04)
    ref = ref_terms(q, k, neg, 0.2, 0.04, 0.0)[2]
    close(ours, ref)
    g_ours = grads(ours, [q, k, neg])
    g_ref = grads(ref, [q, k, neg])
    for a, b in zip(g_ours, g_ref, strict=True):
        if b is None:  # with a queue the key only enters the target: no gradient at all
            assert a is None or a.abs().max() == 0
        else:
            close(a, b)


@pytest.mark.parametrize("shape", SHAPES)
def test_sce_terms_match_loop_and_proposition_1(shape):
    q, k, neg = make(*shape, seed=2, grad=False)
    terms = sce_terms(q, k, neg, temperature=0.1, target_temperature=0.07)
    _, ref_nce, ref_ressl, ref_ceil = ref_terms(q, k, neg, 0.1, 0.07, 0.5)
    close(terms["info_nce"], ref_nce)
    close(terms["ressl"], ref_ressl)
    close(terms["ceil"], ref_ceil)
    assert terms["ceil"] >= 0
    for coeff in (0.0, 0.125, 0.5, 0.9, 1.0):  # eq. 11 with mu = eta = 1 - lambda
        combined = coeff * terms["info_nce"] + (1 - coeff) * (terms["ressl"] + terms["ceil"])
        close(sce(q, k, neg, coeff=coeff), combined)


@pytest.mark.parametrize("shape", SHAPES)
def test_terms_agree_with_standalone_losses(shape):
    q, k, neg = make(*shape, seed=4, grad=False)
    terms = sce_terms(q, k, neg, temperature=0.2, target_temperature=0.05)
    close(terms["info_nce"], info_nce(q, k, neg, temperature=0.2))
    close(terms["ressl"], ressl(q, k, neg, temperature=0.2, target_temperature=0.05))
    close(sce(q, k, neg, temperature=0.2, coeff=1.0), info_nce(q, k, neg, temperature=0.2))


def test_positive_is_masked_not_zero_logit():
    # Pseudo-code of 000 gives the positive a zero target logit; eq. 5 masks it. Distinguish.
    q, k, neg = make(5, 4, 6, seed=9, grad=False)
    qn, kn, nn_ = unit(q), unit(k), unit(neg)
    zero_logit = []
    for i in range(5):
        target = torch.softmax(torch.cat([torch.zeros(1, dtype=F64), nn_ @ kn[i] / 0.07]), 0)
        w = 0.5 * torch.nn.functional.one_hot(torch.tensor(0), 7).to(F64) + 0.5 * target
        logp = torch.log_softmax(torch.cat([(qn[i] @ kn[i]).view(1), nn_ @ qn[i]]) / 0.1, 0)
        zero_logit.append(-(w * logp).sum())
    assert abs(torch.stack(zero_logit).mean() - sce(q, k, neg)) > 1e-6
    close(sce(q, k, neg), ref_terms(q, k, neg, 0.1, 0.07, 0.5)[0])
    # the pseudo-code's (and the authors' code's) form is the option positive_target
    for fn in (sce, sce_reference):
        close(fn(q, k, neg, positive_target="zero_logit"), torch.stack(zero_logit).mean())
    with pytest.raises(ValueError, match="positive_target"):
        sce(q, k, neg, positive_target="zero")


def test_key_gradient_only_through_online_branch():
    q, k, neg = make(6, 4, 10, seed=3)
    ressl(q, k, neg).backward()
    assert k.grad is None or k.grad.abs().max() == 0  # the key is only in the target
    q.grad = None
    sce(q, k, neg, coeff=0.0).backward()  # the key is the positive candidate of p^1
    assert k.grad.abs().max() > 0


@pytest.mark.parametrize(
    "loss",
    [
        lambda a, b, c: ressl(a, b),
        lambda a, b, c: ressl(a, b, c),
        lambda a, b, c: sce(a, b),
        lambda a, b, c: sce(a, b, c, coeff=0.2),
        lambda a, b, c: sum(sce_terms(a, b, c).values()),
    ],
)
def test_gradcheck_query(loss):
    # key and queue enter the stop-gradient target, so finite differences through them
    # would include the target; check the query exactly, key/queue via the loops above.
    q, k, neg = make(4, 3, 5, seed=5, grad=False)
    q.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a: loss(a, k, neg), (q,))


@pytest.mark.parametrize("queue", [True, False])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_is_finite_and_close_to_float32(queue, dtype):
    q, k, neg = make(32, 16, 64, dtype=torch.float32, seed=8)
    neg = neg if queue else None
    for fn in (ressl, sce):
        expected = fn(q, k, neg)
        with torch.autocast("cpu", dtype=dtype):
            value = fn(q, k, neg)
        value.backward()
        assert torch.isfinite(value) and torch.isfinite(q.grad).all()
        assert abs(value.item() - expected.item()) < 1e-2


def test_modules_equal_functions():
    q, k, neg = make(6, 4, 9, grad=False)
    module = RESSLLoss(target_temperature=0.05)
    assert module(q, k, neg) == ressl(q, k, neg, target_temperature=0.05)
    assert SCELoss(coeff=0.25)(q, k) == sce(q, k, coeff=0.25)
    assert "coeff=0.25" in repr(SCELoss(coeff=0.25))


GOOD = make(4, 3, 5, grad=False)


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda q, k, n: sce(q, k, coeff=1.5), "coeff"),
        (lambda q, k, n: sce(q, k, coeff=-0.1), "coeff"),
        (lambda q, k, n: sce(q, k, coeff=math.nan), "coeff"),
        (lambda q, k, n: sce(q, k, temperature=0.0), "temperature"),
        (lambda q, k, n: sce(q, k, target_temperature=-1.0), "target_temperature"),
        (lambda q, k, n: ressl(q, k, target_temperature=math.inf), "target_temperature"),
        (lambda q, k, n: ressl(q, k, temperature=lambda s: s), "temperature"),
        (lambda q, k, n: ressl(q[:1], k[:1]), "query"),
        (lambda q, k, n: sce(q[:1], k[:1]), "query"),
        (lambda q, k, n: sce(q, k[:2]), "key"),
        (lambda q, k, n: sce(q, k, n[:, :1]), "negatives"),
        (lambda q, k, n: sce_terms(q, k * math.nan), "key"),
        (lambda q, k, n: sce_terms(q, k, temperature=0), "temperature"),
        (lambda q, k, n: ressl(q, k, n.float()), "negatives"),
        (lambda q, k, n: SCELoss(coeff=2.0), "coeff"),
        (lambda q, k, n: RESSLLoss(target_temperature=0.0), "target_temperature"),
    ],
)
def test_bad_input_raises_value_error_naming_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call(*GOOD)
