"""InfoNCE, NT-Xent, DCL and hard contrastive loss against per-anchor loops (float64)."""

from __future__ import annotations

import math

import pytest
import torch
from loss_inputs import F64, SHAPES, make, unit

from contrastkit.losses.dystress import DySTreSSTemperature, LinearTemperature
from contrastkit.losses.hard_contrastive import HardContrastiveLoss, hard_contrastive
from contrastkit.losses.infonce import DCLLoss, InfoNCELoss, NTXentLoss, dcl, info_nce, nt_xent
from contrastkit.losses.temperature import PairTemperature


def tau(t, s):
    """Temperature of one pair, as a constant for the gradient (DySTreSS Alg. 3 detaches)."""
    return t(s.detach()) if callable(t) else t


def pair(temperature):
    if isinstance(temperature, PairTemperature):
        return temperature.positive, temperature.negative
    return temperature, temperature


# ---- brute-force references, one anchor at a time, straight from the equations ----


def ref_info_nce(q, k, neg, temperature, num_hard=None):
    """-log exp(s_ii/t) / (exp(s_ii/t) + sum over (hardest) negatives exp(s_ij/t))."""
    tp, tn = pair(temperature)
    q, k = unit(q), unit(k)
    cands = None if neg is None else unit(neg)
    losses = []
    for i in range(q.shape[0]):
        negs = [k[j] for j in range(k.shape[0]) if j != i] if cands is None else list(cands)
        sims = [q[i] @ c for c in negs]
        if num_hard is not None:  # hardest = largest raw cosine similarity
            sims = sorted(sims, key=lambda s: -s.item())[:num_hard]
        s_pos = q[i] @ k[i]
        pos = torch.exp(s_pos / tau(tp, s_pos))
        den = pos + sum(torch.exp(s / tau(tn, s)) for s in sims)
        losses.append(-torch.log(pos / den))
    return torch.stack(losses).mean()


def ref_views(z1, z2, temperature, decoupled):
    """NT-Xent (SimCLR) or DCL over the 2N views; positive of view a is view a +- N."""
    tp, tn = pair(temperature)
    z = unit(torch.cat([z1, z2]))
    n2 = z.shape[0]
    losses = []
    for a in range(n2):
        p = (a + n2 // 2) % n2
        s_pos = z[a] @ z[p]
        logit_pos = s_pos / tau(tp, s_pos)
        others = [b for b in range(n2) if b != a and b != p]
        neg = sum(torch.exp(z[a] @ z[b] / tau(tn, z[a] @ z[b])) for b in others)
        if decoupled:
            losses.append(-logit_pos + torch.log(neg))
        else:
            losses.append(-torch.log(torch.exp(logit_pos) / (torch.exp(logit_pos) + neg)))
    return torch.stack(losses).mean()


def grads(loss, tensors):
    tensors = [t for t in tensors if t is not None]
    return torch.autograd.grad(loss, tensors, allow_unused=True)


def assert_same_value_and_grad(ours, ref, inputs):
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-10)
    for g_ours, g_ref in zip(grads(ours, inputs), grads(ref, inputs), strict=True):
        torch.testing.assert_close(g_ours, g_ref, rtol=0, atol=1e-10)


# ---- values and gradients ----

TEMPERATURES = [
    0.1,
    0.7,
    DySTreSSTemperature(0.1, 0.2),
    DySTreSSTemperature(0.07, 0.3, shift=-0.4, scale=0.7),
    PairTemperature(positive=0.2, negative=LinearTemperature(0.05, 0.5)),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("temperature", TEMPERATURES)
def test_info_nce_matches_loop(shape, temperature):
    q, k, neg = make(*shape)
    ours = info_nce(q, k, neg, temperature=temperature)
    assert ours.dim() == 0
    assert_same_value_and_grad(ours, ref_info_nce(q, k, neg, temperature), [q, k, neg])


@pytest.mark.parametrize("n,d", [(2, 3), (5, 4), (9, 6)])
@pytest.mark.parametrize("temperature", TEMPERATURES)
def test_nt_xent_and_dcl_match_loop(n, d, temperature):
    z1, z2, _ = make(n, d)
    for fn, decoupled in [(nt_xent, False), (dcl, True)]:
        ours = fn(z1, z2, temperature=temperature)
        assert_same_value_and_grad(ours, ref_views(z1, z2, temperature, decoupled), [z1, z2])


@pytest.mark.parametrize("n,d,temperature", [(4, 3, 0.5), (12, 8, 0.1), (30, 16, 0.07)])
def test_nt_xent_equals_pytorch_metric_learning(n, d, temperature):
    pml = pytest.importorskip("pytorch_metric_learning.losses")
    z1, z2, _ = make(n, d, grad=False)
    labels = torch.cat([torch.arange(n), torch.arange(n)])
    expected = pml.NTXentLoss(temperature=temperature)(torch.cat([z1, z2]), labels)
    torch.testing.assert_close(
        nt_xent(z1, z2, temperature=temperature), expected.to(F64), rtol=0, atol=1e-10
    )


def test_nt_xent_and_dcl_differ_by_positive_in_denominator():
    z1, z2, _ = make(6, 4, grad=False)
    # DCL drops the positive from the denominator, so it is strictly smaller
    assert dcl(z1, z2, temperature=0.3) < nt_xent(z1, z2, temperature=0.3)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("num_hard", [1, 3, 8])
@pytest.mark.parametrize("temperature", [0.1, DySTreSSTemperature(0.1, 0.2)])
def test_hard_contrastive_matches_loop(shape, num_hard, temperature):
    q, k, neg = make(*shape, seed=3)
    ours = hard_contrastive(q, k, neg, temperature=temperature, num_hard=num_hard)
    ref = ref_info_nce(q, k, neg, temperature, num_hard=num_hard)
    assert_same_value_and_grad(ours, ref, [q, k, neg])


@pytest.mark.parametrize("shape", SHAPES)
def test_hard_contrastive_with_all_negatives_is_info_nce(shape):
    q, k, neg = make(*shape, grad=False)
    available = q.shape[0] - 1 if neg is None else neg.shape[0]
    for num_hard in (available, available + 5, 4096):
        torch.testing.assert_close(
            hard_contrastive(q, k, neg, num_hard=num_hard), info_nce(q, k, neg), rtol=0, atol=0
        )
    if available > 1:  # fewer negatives in the denominator: strictly smaller loss
        assert hard_contrastive(q, k, neg, num_hard=available - 1) < info_nce(q, k, neg)


def test_hard_contrastive_selects_on_raw_similarity_under_dynamic_temperature():
    # s / tau(s) with tau = 0.1 exp(3 s) is not monotonic in s, so "hardest by logit" and
    # "hardest by cosine similarity" disagree; we choose on cosine similarity.
    def temperature(s):
        return 0.1 * torch.exp(3.0 * s)

    q, k, neg = make(5, 3, 40, seed=7)
    ours = hard_contrastive(q, k, neg, temperature=temperature, num_hard=6)
    ref = ref_info_nce(q, k, neg, temperature, num_hard=6)
    assert_same_value_and_grad(ours, ref, [q, k, neg])

    by_logit = []  # the other reading, to show the test can tell them apart
    qn, kn, nn_ = unit(q), unit(k), unit(neg)
    for i in range(5):
        logits = (nn_ @ qn[i]) / temperature(nn_ @ qn[i])
        pos = (qn[i] @ kn[i]) / temperature(qn[i] @ kn[i])
        top = logits.topk(6).values
        by_logit.append(torch.logaddexp(pos, torch.logsumexp(top, 0)) - pos)
    assert abs(torch.stack(by_logit).mean().item() - ours.item()) > 1e-6


# ---- hard negatives: the sampled-bracket selection equals a plain topk, ties included ----


def topk_hard_mask(logits, num_hard):
    """Reference selection: keep entries >= the num_hard-th largest of their row (torch.topk)."""
    kth = logits.topk(num_hard, dim=1).values[:, -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def tied_logits(n, width, num_hard, *, seed=0, dtype=F64):
    """Rows wide enough for the sampled path, with heavy ties and adversarial orderings.

    Row 5 holds 101 copies of its ``num_hard``-th largest value (when ``num_hard`` allows).
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, width, generator=g, dtype=dtype)
    x[0] = (x[0] * 2).round() / 2  # a handful of distinct values, thousands of ties each
    x[1, ::3] = x[1, 0]  # a third of the row equal to one value
    x[2] = x[2].sort().values  # sorted: the strided sample sees a skewed picture
    x[3] = 0.25  # a constant row
    x[4, ::2] = float("-inf")  # masked entries (in-batch diagonals are -inf)
    if num_hard <= width - 100:  # ties exactly at the threshold
        x[5, :100] = x[5, 100:].kthvalue(width - 100 - num_hard + 1).values
    return x


@pytest.mark.parametrize("dtype", [F64, torch.float32])
@pytest.mark.parametrize("num_hard", [1, 50, 1000, 4096, 11999])
def test_hard_selection_equals_topk_reference_with_ties(dtype, num_hard):
    from contrastkit.losses._hard_negatives import _SELECT_SAMPLE, hard_mask_

    width = 12000
    assert width >= 4 * _SELECT_SAMPLE  # the sampled bracket is used, not the topk fallback
    logits = tied_logits(8, width, num_hard, dtype=dtype)
    ours = logits.clone()
    hard_mask_(ours, num_hard, ())
    ref = topk_hard_mask(logits, num_hard)
    assert torch.equal(ours, ref)
    kept = (ours > float("-inf")).sum(dim=1)
    assert (kept[[0, 1, 2, 3, 5, 6, 7]] >= num_hard).all()
    assert kept[3] == width  # a constant row: every entry ties at the threshold
    if num_hard <= width - 100:
        assert kept[5] == num_hard + 100  # the ">=" rule keeps all 101 tied entries


def test_hard_contrastive_with_tied_queue_matches_topk_loss_and_grad():
    # duplicated queue rows give exactly tied similarities around every anchor's threshold
    g = torch.Generator().manual_seed(5)
    q = torch.randn(6, 8, generator=g, dtype=F64, requires_grad=True)
    k = torch.randn(6, 8, generator=g, dtype=F64, requires_grad=True)
    base = torch.randn(1500, 8, generator=g, dtype=F64)
    neg = base.repeat(7, 1)[torch.randperm(10500, generator=g)].requires_grad_()
    ours = hard_contrastive(q, k, neg, temperature=0.2, num_hard=703)

    qn, kn, nn_ = unit(q), unit(k), unit(neg)
    sims = qn @ nn_.T
    kth = sims.detach().topk(703, dim=1).values[:, -1:]
    logits = (sims / 0.2).masked_fill(sims.detach() < kth, float("-inf"))
    pos = (qn * kn).sum(1) / 0.2
    ref = (torch.logaddexp(pos, torch.logsumexp(logits, dim=1)) - pos).mean()
    assert ((sims.detach() >= kth).sum(1) > 703).all()  # ties at the threshold are kept
    assert_same_value_and_grad(ours, ref, [q, k, neg])


def test_dynamic_temperature_is_evaluated_on_detached_similarities():
    q, k, neg = make(6, 4, 9, seed=2)
    t = DySTreSSTemperature(0.1, 0.2)
    ours = info_nce(q, k, neg, temperature=t)
    # same loss with the temperatures frozen as a constant matrix
    qn, kn, nn_ = unit(q), unit(k), unit(neg)
    pos_s, neg_s = (qn * kn).sum(-1), qn @ nn_.T
    frozen_pos, frozen_neg = t(pos_s).detach(), t(neg_s).detach()
    pos = pos_s / frozen_pos
    frozen = (torch.logaddexp(pos, torch.logsumexp(neg_s / frozen_neg, 1)) - pos).mean()
    assert_same_value_and_grad(ours, frozen, [q, k, neg])
    # ... which differs from differentiating through the temperature
    pos_s, neg_s = (unit(q) * unit(k)).sum(-1), unit(q) @ unit(neg).T
    live = (
        torch.logaddexp(pos_s / t(pos_s), torch.logsumexp(neg_s / t(neg_s), 1)) - pos_s / t(pos_s)
    ).mean()
    g_live, g_ours = grads(live, [q]), grads(info_nce(q, k, neg, temperature=t), [q])
    assert (g_live[0] - g_ours[0]).abs().max() > 1e-6


def test_temperature_function_receives_cosine_similarities():
    seen = []

    def record(s):
        seen.append(s.clone())
        return torch.full_like(s, 0.2)

    q, k, neg = make(4, 3, 5, grad=False)
    loss = info_nce(q, k, neg, temperature=record)
    torch.testing.assert_close(loss, info_nce(q, k, neg, temperature=0.2), rtol=0, atol=1e-12)
    sims = torch.cat([s.flatten() for s in seen])
    assert sims.abs().max() <= 1 + 1e-12
    expected = torch.cat([(unit(q) * unit(k)).sum(-1), (unit(q) @ unit(neg).T).flatten()])
    torch.testing.assert_close(sims.sort().values, expected.sort().values)


def test_normalisation_and_its_gradient_match_f_normalize():
    # zero and sub-eps rows: F.normalize divides by max(norm, 1e-12), so must we
    q, k, neg = make(5, 4, 8, seed=6)
    with torch.no_grad():
        neg[2] = 0.0
        neg[5] = 1e-13
        k[1] *= 1e-13
    fn = torch.nn.functional.normalize

    def plain(q, k, neg, t=0.2):
        qn, kn = fn(q, dim=-1), fn(k, dim=-1)
        pos = (qn * kn).sum(-1) / t
        if neg is None:  # eq. 3: all keys are candidates
            return (torch.logsumexp(qn @ kn.T / t, 1) - pos).mean()
        negs = qn @ fn(neg, dim=-1).T / t
        return (torch.logaddexp(pos, torch.logsumexp(negs, 1)) - pos).mean()

    for queue in (neg, None):
        ours = info_nce(q, k, queue, temperature=0.2)
        ref = plain(q, k, queue)
        torch.testing.assert_close(ours, ref, rtol=0, atol=1e-10)
        inputs = [q, k] if queue is None else [q, k, queue]
        for a, b in zip(grads(ours, inputs), grads(ref, inputs), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)  # k[1] grads are ~1e12


def test_key_receives_gradient():
    q, k, neg = make(5, 4, 7)
    info_nce(q, k, neg).backward()
    assert k.grad is not None and k.grad.abs().sum() > 0
    assert neg.grad is not None and neg.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "loss",
    [
        lambda a, b, c: info_nce(a, b),
        lambda a, b, c: info_nce(a, b, c, temperature=0.3),
        lambda a, b, c: nt_xent(a, b),
        lambda a, b, c: dcl(a, b, temperature=0.2),
        lambda a, b, c: hard_contrastive(a, b, c, num_hard=2),
        lambda a, b, c: hard_contrastive(a, b, num_hard=2),
        lambda a, b, c: info_nce(a, b, c, temperature=PairTemperature(0.3, 0.1)),
    ],
)
def test_gradcheck(loss):
    q, k, neg = make(4, 3, 5, seed=5)
    assert torch.autograd.gradcheck(loss, (q, k, neg))


# ---- low precision ----


@pytest.mark.parametrize(
    "loss",
    [
        lambda a, b, c: info_nce(a, b, c),
        lambda a, b, c: info_nce(a, b),
        lambda a, b, c: nt_xent(a, b),
        lambda a, b, c: dcl(a, b),
        lambda a, b, c: hard_contrastive(a, b, c, num_hard=16),
        lambda a, b, c: nt_xent(a, b, temperature=DySTreSSTemperature()),
    ],
)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_is_finite_and_close_to_float32(loss, dtype):
    q, k, neg = make(32, 16, 64, dtype=torch.float32, seed=11)
    expected = loss(q, k, neg)
    with torch.autocast("cpu", dtype=dtype):
        value = loss(q, k, neg)
    value.backward()
    assert torch.isfinite(value)
    assert all(torch.isfinite(t.grad).all() for t in (q, k))
    assert abs(value.item() - expected.item()) < 1e-2


def test_extreme_temperature_stays_finite():
    q, k, neg = make(8, 4, 16, dtype=torch.float32)
    loss = info_nce(q, k, neg, temperature=1e-4)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(q.grad).all()


# ---- modules ----


def test_modules_equal_functions():
    q, k, neg = make(6, 4, 9, grad=False)
    t = DySTreSSTemperature()
    assert InfoNCELoss(temperature=t)(q, k, neg) == info_nce(q, k, neg, temperature=t)
    assert NTXentLoss()(q, k) == nt_xent(q, k)
    assert DCLLoss(temperature=0.2)(q, k) == dcl(q, k, temperature=0.2)
    assert HardContrastiveLoss(num_hard=3)(q, k, neg) == hard_contrastive(q, k, neg, num_hard=3)
    assert "num_hard=3" in repr(HardContrastiveLoss(num_hard=3))


# ---- bad input ----

GOOD = make(4, 3, 5, grad=False)


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda q, k, n: info_nce(q, k[:3]), "key"),
        (lambda q, k, n: info_nce(q, k[:, :2]), "key"),
        (lambda q, k, n: info_nce(q, k, n[:, :2]), "negatives"),
        (lambda q, k, n: info_nce(q[:1], k[:1]), "query"),
        (lambda q, k, n: info_nce(q[0], k[0]), "query"),
        (lambda q, k, n: info_nce(q, k, n.float()), "negatives"),
        (lambda q, k, n: info_nce(q, k, temperature=0.0), "temperature"),
        (lambda q, k, n: info_nce(q, k, temperature=-1.0), "temperature"),
        (lambda q, k, n: info_nce(q, k, temperature=math.nan), "temperature"),
        (lambda q, k, n: info_nce(q, k, temperature=math.inf), "temperature"),
        (lambda q, k, n: info_nce(q, k, temperature="hot"), "temperature"),
        (lambda q, k, n: info_nce(q * math.nan, k), "query"),
        (lambda q, k, n: info_nce(q, k, n * math.inf), "negatives"),
        (lambda q, k, n: info_nce(q, k, n[:0]), "negatives"),
        (lambda q, k, n: info_nce(q, k.long()), "key"),
        (lambda q, k, n: info_nce(q.float(), k.float() * 1e30), "key.*overflow"),
        (lambda q, k, n: nt_xent(q[:1], k[:1]), "z1"),
        (lambda q, k, n: nt_xent(q, k[:3]), "z2"),
        (lambda q, k, n: nt_xent(q, k, temperature=0), "temperature"),
        (lambda q, k, n: dcl(q, k * math.nan), "z2"),
        (lambda q, k, n: dcl(q[:1], k[:1]), "z1"),
        (lambda q, k, n: hard_contrastive(q, k, num_hard=0), "num_hard"),
        (lambda q, k, n: hard_contrastive(q, k, num_hard=2.5), "num_hard"),
        (lambda q, k, n: hard_contrastive(q, k, n, temperature=-0.1), "temperature"),
        (lambda q, k, n: info_nce(q, k, temperature=PairTemperature(0.1, -1.0)), "negative"),
        (lambda q, k, n: info_nce(q, k, temperature=lambda s: s.sum()), "temperature"),
        (lambda q, k, n: InfoNCELoss(temperature=0), "temperature"),
        (lambda q, k, n: NTXentLoss(temperature=math.nan), "temperature"),
        (lambda q, k, n: DCLLoss(temperature=-2.0), "temperature"),
        (lambda q, k, n: HardContrastiveLoss(num_hard=0), "num_hard"),
    ],
)
def test_bad_input_raises_value_error_naming_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call(*GOOD)
