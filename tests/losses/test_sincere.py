"""Tests of SupCon, SINCERE and ε-SupInfoNCE (contrastkit.losses.sincere).

The reference loops below are written straight from the SINCERE paper (Feeney & Hughes 2023)
in its own notation: the softmax is centred on the partner ``z_p`` (``exp(z_j · z_p / τ)``),
eqs. 3, 12 and 15. The implementation centres rows on
the anchor (Khosla et al.), so agreement also checks the App. I equivalence of the two forms.

One file for the three losses of one paper (about 560 lines): its sections (reference loops,
other libraries, no positives, gradients, low precision, modules, bad input) share the reference
loop and the table of losses.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable

import pytest
import torch
from torch import Tensor

from contrastkit.losses.sincere import (
    EpsSupInfoNCELoss,
    SINCERELoss,
    SupConLoss,
    eps_supinfonce,
    sincere,
    supcon,
)

LossFn = Callable[..., Tensor]
LOSSES: dict[str, LossFn] = {
    "supcon": supcon,
    "sincere": sincere,
    "eps_supinfonce": eps_supinfonce,
}
ATOL = 1e-10


# --------------------------------------------------------------------------- reference loops


def _flatten_python(features: Tensor, labels: Tensor) -> tuple[list[list[float]], list[int]]:
    """Unit vectors and labels as Python lists; views ``(b, v)`` listed one by one."""
    zs: list[list[float]] = []
    ys: list[int] = []
    if features.dim() == 2:
        rows = [(features[i], int(labels[i])) for i in range(features.shape[0])]
    else:
        rows = [
            (features[b, v], int(labels[b]))
            for b in range(features.shape[0])
            for v in range(features.shape[1])
        ]
    for vec, label in rows:
        values = [float(x) for x in vec]
        norm = math.sqrt(sum(x * x for x in values))
        zs.append([x / norm for x in values])
        ys.append(label)
    return zs, ys


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def reference(
    kind: str, features: Tensor, labels: Tensor, temperature: float, epsilon: float = 0.0
) -> float:
    """Batch loss from eqs. 3 (SupCon), 12 (SINCERE) and 15 (ε-SupInfoNCE), one pair at a time.

    ``mean over S with P ≠ ∅ of (1/|P|) Σ_{p∈P} L(z_S, z_p)`` with, in the paper's notation,
    T = class of S, P = T \\ {S}, N = I \\ T and

    * eq. 3:  den = e^{zS·zp/τ} + Σ_{j∈P\\{p}} e^{zj·zp/τ} + Σ_{n∈N} e^{zn·zp/τ}
    * eq. 12: den = e^{zS·zp/τ} + Σ_{n∈N} e^{zn·zp/τ}
    * eq. 15: den = e^{zS·zp/τ − ε} + Σ_{n∈N} e^{zn·zp/τ}

    and ``L = −log(e^{zS·zp/τ} / den)``.
    """
    zs, ys = _flatten_python(features, labels)
    index = range(len(zs))
    total, anchors = 0.0, 0
    for s in index:
        target = [i for i in index if ys[i] == ys[s]]
        partners = [i for i in target if i != s]
        noise = [i for i in index if ys[i] != ys[s]]
        if not partners:
            continue
        anchor_sum = 0.0
        for p in partners:
            numerator = math.exp(_dot(zs[s], zs[p]) / temperature)
            noise_sum = sum(math.exp(_dot(zs[n], zs[p]) / temperature) for n in noise)
            if kind == "supcon":
                others = sum(math.exp(_dot(zs[j], zs[p]) / temperature) for j in partners if j != p)
                denominator = numerator + others + noise_sum
            elif kind == "sincere":
                denominator = numerator + noise_sum
            elif kind == "eps_supinfonce":
                denominator = math.exp(_dot(zs[s], zs[p]) / temperature - epsilon) + noise_sum
            else:
                raise AssertionError(kind)
            anchor_sum += -math.log(numerator / denominator)
        total += anchor_sum / len(partners)
        anchors += 1
    return total / anchors


def call(kind: str, features: Tensor, labels: Tensor, temperature: float, epsilon: float) -> Tensor:
    if kind == "eps_supinfonce":
        return eps_supinfonce(features, labels, temperature=temperature, epsilon=epsilon)
    return LOSSES[kind](features, labels, temperature=temperature)


# (features shape, labels) — labels for the first dimension (M, or B for multi-view)
CASES = {
    "random-3-classes": ((10, 5), [0, 1, 2, 0, 1, 2, 0, 0, 1, 2]),
    "with-singletons": ((12, 16), [0, 0, 0, 1, 1, 2, 3, 4, 4, 4, 5, 6]),
    "one-big-class": ((7, 3), [1, 1, 1, 1, 1, 0, 2]),
    "pair-only": ((2, 4), [3, 3]),
    "no-negatives": ((5, 3), [2, 2, 2, 2, 2]),
    "negative-labels": ((6, 8), [-1, -1, 7, 7, -5, 0]),
    "multiview-unique": ((4, 2, 6), [0, 1, 2, 3]),
    "multiview-repeated": ((5, 3, 4), [0, 1, 0, 2, 1]),
    "multiview-singleton-view": ((4, 1, 5), [0, 0, 1, 2]),
}


@pytest.mark.parametrize("kind", sorted(LOSSES))
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize(("temperature", "epsilon"), [(0.1, 0.25), (0.5, 0.1), (1.0, 1.5)])
def test_matches_reference_loop(kind: str, case: str, temperature: float, epsilon: float) -> None:
    shape, label_list = CASES[case]
    gen = torch.Generator().manual_seed(sorted(CASES).index(case))
    features = torch.randn(shape, generator=gen, dtype=torch.float64)
    labels = torch.tensor(label_list)
    got = call(kind, features, labels, temperature, epsilon)
    want = reference(kind, features, labels, temperature, epsilon)
    assert got.dtype == torch.float64
    assert got.shape == ()
    assert abs(got.item() - want) <= ATOL * max(1.0, abs(want))


def test_features_are_l2_normalised() -> None:
    gen = torch.Generator().manual_seed(1)
    features = torch.randn(9, 4, generator=gen, dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1, 2])
    scale = torch.rand(9, 1, generator=gen, dtype=torch.float64) * 10 + 0.1
    for fn in LOSSES.values():
        torch.testing.assert_close(
            fn(features * scale, labels), fn(features, labels), atol=ATOL, rtol=0
        )


def test_multiview_equals_flattened_views_in_any_order() -> None:
    gen = torch.Generator().manual_seed(2)
    features = torch.randn(6, 3, 5, generator=gen, dtype=torch.float64)
    labels = torch.tensor([0, 1, 1, 2, 0, 3])
    flat = features.reshape(18, 5)
    flat_labels = labels.repeat_interleave(3)
    order = torch.randperm(18, generator=gen)
    for fn in LOSSES.values():
        multi = fn(features, labels)
        torch.testing.assert_close(multi, fn(flat, flat_labels), atol=ATOL, rtol=0)
        torch.testing.assert_close(multi, fn(flat[order], flat_labels[order]), atol=ATOL, rtol=0)


def test_sincere_is_eps_supinfonce_with_zero_epsilon() -> None:
    gen = torch.Generator().manual_seed(3)
    for shape, labels in [
        ((11, 7), torch.randint(0, 3, (11,), generator=gen)),
        ((6, 2, 7), torch.tensor([0, 1, 0, 2, 2, 5])),
    ]:
        features = torch.randn(shape, generator=gen, dtype=torch.float64)
        for temperature in (0.05, 0.3):
            torch.testing.assert_close(
                sincere(features, labels, temperature=temperature),
                eps_supinfonce(features, labels, temperature=temperature, epsilon=0.0),
                atol=ATOL,
                rtol=0,
            )


def test_eps_supinfonce_decreases_with_epsilon_and_is_bounded_by_minus_epsilon() -> None:
    gen = torch.Generator().manual_seed(4)
    features = torch.randn(10, 6, generator=gen, dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3, 3])
    values = [eps_supinfonce(features, labels, epsilon=e).item() for e in (0.0, 0.1, 0.5, 2.0)]
    assert all(a > b for a, b in itertools.pairwise(values))
    # with every partner identical and noise far away, ℓ → −ε (denominator ≈ e^{s/τ − ε})
    tight = torch.tensor([[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)
    got = eps_supinfonce(tight, torch.tensor([0, 0, 1, 1]), temperature=0.05, epsilon=0.7)
    assert got.item() == pytest.approx(-0.7, abs=1e-12)


def test_supcon_is_at_least_sincere() -> None:
    # SupCon's denominator has the extra partners P \ {p}: its pair loss is never smaller
    gen = torch.Generator().manual_seed(5)
    features = torch.randn(12, 4, generator=gen, dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 4])
    assert supcon(features, labels).item() > sincere(features, labels).item()
    pairs_only = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5])  # |P| = 1: identical losses
    torch.testing.assert_close(
        supcon(features, pairs_only), sincere(features, pairs_only), atol=ATOL, rtol=0
    )


# --------------------------------------------------------------------------- other libraries


def _own_nt_xent(z1: Tensor, z2: Tensor, temperature: float) -> float:
    """NT-Xent (SimCLR) by a loop: every one of the 2B views is an anchor, its other view the
    positive, all 2B − 1 others in the denominator."""
    views = [*z1, *z2]
    size = z1.shape[0]
    total = 0.0
    for i, zi in enumerate(views):
        zi = zi / zi.norm()
        j = (i + size) % (2 * size)
        logits = [
            float(zi @ (zk / zk.norm())) / temperature for k, zk in enumerate(views) if k != i
        ]
        positive = float(zi @ (views[j] / views[j].norm())) / temperature
        total += -(positive - math.log(sum(math.exp(x) for x in logits)))
    return total / (2 * size)


@pytest.mark.parametrize("temperature", [0.1, 0.5])
def test_unique_labels_two_views_reduce_to_nt_xent_loop(temperature: float) -> None:
    gen = torch.Generator().manual_seed(6)
    features = torch.randn(7, 2, 5, generator=gen, dtype=torch.float64)
    labels = torch.arange(7) * 3
    want = _own_nt_xent(features[:, 0], features[:, 1], temperature)
    for fn in (supcon, sincere):
        assert fn(features, labels, temperature=temperature).item() == pytest.approx(want, abs=ATOL)


@pytest.mark.parametrize("temperature", [0.1, 0.5])
def test_unique_labels_two_views_reduce_to_library_nt_xent(temperature: float) -> None:
    infonce = pytest.importorskip("contrastkit.losses.infonce")
    gen = torch.Generator().manual_seed(7)
    features = torch.randn(9, 2, 6, generator=gen, dtype=torch.float64)
    labels = torch.arange(9)
    want = infonce.nt_xent(features[:, 0], features[:, 1], temperature=temperature)
    for fn in (supcon, sincere):
        torch.testing.assert_close(
            fn(features, labels, temperature=temperature), want, atol=ATOL, rtol=0
        )


@pytest.mark.parametrize("temperature", [0.07, 0.1, 0.5])
@pytest.mark.parametrize(
    ("shape", "label_list"),
    [
        ((16, 8), [0, 1, 2, 3] * 4),
        ((12, 5), [0, 0, 0, 1, 1, 2, 3, 4, 4, 4, 5, 6]),  # singletons: PML gives them 0 loss
        ((6, 2, 7), [0, 1, 0, 2, 1, 3]),  # multi-view, flattened for PML
    ],
)
def test_supcon_matches_pytorch_metric_learning(
    temperature: float, shape: tuple[int, ...], label_list: list[int]
) -> None:
    # PML's SupConLoss normalises (CosineSimilarity), divides by τ, takes log-softmax over all
    # other samples, divides the positive sum by |P| (+ a tiny constant, ~1e-308 in float64) and
    # averages with AvgNonZeroReducer: the mean over anchors with a non-zero loss, i.e. exactly
    # the anchors that have a partner (their loss is > 0 whenever the denominator has ≥ 2
    # terms). No τ/base_τ rescaling as in Khosla's reference code, so no conversion is needed
    # beyond flattening (B, V, D) to (B·V, D) with labels repeated per view.
    pml_losses = pytest.importorskip("pytorch_metric_learning.losses")
    gen = torch.Generator().manual_seed(8)
    features = torch.randn(shape, generator=gen, dtype=torch.float64)
    labels = torch.tensor(label_list)
    if features.dim() == 3:
        flat = features.reshape(-1, shape[-1])
        flat_labels = labels.repeat_interleave(shape[1])
    else:
        flat, flat_labels = features, labels
    want = pml_losses.SupConLoss(temperature=temperature)(flat, flat_labels)
    torch.testing.assert_close(
        supcon(features, labels, temperature=temperature), want, atol=ATOL, rtol=0
    )


# --------------------------------------------------------------------------- no positives


@pytest.mark.parametrize("kind", sorted(LOSSES))
@pytest.mark.parametrize("shape", [(6, 3), (4, 1, 3)])
def test_no_positive_pair_gives_connected_zero_with_warning(
    kind: str, shape: tuple[int, ...]
) -> None:
    features = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    labels = torch.arange(shape[0])
    with pytest.warns(UserWarning, match="no positive pair"):
        loss = call(kind, features, labels, 0.1, 0.25)
    assert loss.item() == 0.0
    assert loss.requires_grad
    loss.backward()
    assert features.grad is not None
    assert torch.equal(features.grad, torch.zeros_like(features))


@pytest.mark.parametrize(("kind", "value"), [("sincere", 0.0), ("eps_supinfonce", -0.25)])
def test_one_label_for_the_whole_batch_is_warned_about(kind: str, value: float) -> None:
    """No noise sample: every pair term is -log e^{s/t} / e^{s/t - eps} = -eps (eq. 15)."""
    features = torch.randn(6, 2, 4, dtype=torch.float64, requires_grad=True)
    labels = torch.zeros(6, dtype=torch.long)
    with pytest.warns(UserWarning, match=r"same label.*no noise sample"):
        loss = call(kind, features, labels, 0.1, 0.25)
    assert loss.item() == pytest.approx(value, abs=ATOL)
    loss.backward()
    assert torch.allclose(features.grad, torch.zeros_like(features), atol=ATOL)


@pytest.mark.parametrize("kind", sorted(LOSSES))
def test_anchors_without_positives_add_no_nan_and_no_warning(kind: str) -> None:
    features = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 0, 1, 2, 3, 4, 5, 6])  # only two anchors have a partner
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss = call(kind, features, labels, 0.1, 0.25)
    loss.backward()
    assert torch.isfinite(loss)
    assert features.grad is not None and torch.isfinite(features.grad).all()
    assert loss.item() == pytest.approx(reference(kind, features.detach(), labels, 0.1, 0.25))


# --------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("kind", sorted(LOSSES))
@pytest.mark.parametrize(
    ("shape", "label_list"),
    [((6, 4), [0, 0, 1, 1, 2, 0]), ((3, 2, 3), [0, 1, 0]), ((5, 3), [4, 4, 4, 4, 4])],
)
def test_gradcheck(kind: str, shape: tuple[int, ...], label_list: list[int]) -> None:
    gen = torch.Generator().manual_seed(9)
    features = torch.randn(shape, generator=gen, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor(label_list)
    assert torch.autograd.gradcheck(
        lambda f: call(kind, f, labels, 0.2, 0.3), (features,), eps=1e-6, atol=1e-7
    )


def _repulsion_batch() -> tuple[Tensor, Tensor]:
    """Class A = {z_p, z_a, z_b}, noise = {z_n}; cos(z_p, z_a) = 0.5, every other pair ⟂.

    z_p and z_a span the e1-e2 plane, z_b = e3, z_n = e4, so moving z_p on the sphere inside
    that plane changes only s_pa: the tangential gradient is c·(z_a − s_pa z_p) with
    c = ∂L/∂s_pa, and −grad · z_a = −c (1 − s_pa²).
    """
    cos = 0.5
    features = torch.tensor(
        [
            [1.0, 0.0, 0.0, 0.0],  # z_p
            [cos, math.sqrt(1 - cos**2), 0.0, 0.0],  # z_a
            [0.0, 0.0, 1.0, 0.0],  # z_b
            [0.0, 0.0, 0.0, 1.0],  # z_n
        ],
        dtype=torch.float64,
    )
    return features, torch.tensor([0, 0, 0, 1])


def test_sincere_never_repels_a_same_class_partner_but_supcon_does() -> None:
    """Eqs. 13-14. Gradient descent moves z_p along −∇; it *repels* z_p from z_a when the
    similarity z_p · z_a decreases, i.e. when −∇_{z_p} L · z_a < 0 (∇ · z_a > 0: a positive
    scalar times z_a in the gradient, the case eq. 14 allows for SupCon when
    softmax(s_pS) > 1/|P|, and eq. 13 excludes for SINCERE, whose z_S scalar is in [−1, 0]).

    Here |P| = 2 and SupCon's softmax weight of z_a for anchor z_p is
    e^5 / (e^5 + e^0 + e^0) ≈ 0.987 > 1/2, so SupCon repels; SINCERE must attract (its z_a
    scalar is e^5 / (e^5 + e^0) − 1 ≈ −0.0067 < 0).
    """
    features, labels = _repulsion_batch()
    z_a = features[1]

    def descent_dot_z_a(fn: LossFn) -> float:
        x = features.clone().requires_grad_(True)
        fn(x, labels, temperature=0.1).backward()
        assert x.grad is not None
        return float(-x.grad[0] @ z_a)

    assert descent_dot_z_a(supcon) < -1e-3  # SupCon: descent pushes z_p away from z_a
    assert descent_dot_z_a(sincere) > 1e-3  # SINCERE: descent pulls z_p towards z_a
    assert descent_dot_z_a(eps_supinfonce) > 1e-3

    # The same statement without autograd: rotate z_p away from z_a inside their plane.
    delta = 1e-3
    away = features.clone()
    away[0] = torch.tensor([math.cos(delta), -math.sin(delta), 0.0, 0.0], dtype=torch.float64)
    assert float(away[0] @ z_a) < float(features[0] @ z_a)
    assert supcon(away, labels).item() < supcon(features, labels).item()
    assert sincere(away, labels).item() > sincere(features, labels).item()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_only_supcon_loss_can_increase_with_a_same_class_similarity(seed: int) -> None:
    """Random batches: raising any one same-class similarity s_pa (all others fixed) never
    raises SINCERE or ε-SupInfoNCE, since a partner sits in a denominator only next to itself
    in the numerator (Sec. 3.3); for SupCon it does for some pair (intra-class repulsion).

    Features are the rows of the Cholesky factor of a Gram matrix (unit diagonal), so a single
    similarity can be moved; they are drawn around class centres so that classes cluster.
    At τ = 0.05 each anchor's softmax is dominated by its nearest sample; when that is one of
    its |P| = 2 partners, eq. 14's z_S scalar is > 0 for SupCon.
    """
    gen = torch.Generator().manual_seed(seed)
    size = 8
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2])
    centres = torch.randn(3, size + 4, generator=gen, dtype=torch.float64)
    base = centres[labels] + 0.7 * torch.randn(size, size + 4, generator=gen, dtype=torch.float64)
    base = base / base.norm(dim=1, keepdim=True)
    gram = base @ base.T
    delta = 1e-6

    def slope(fn: LossFn, p: int, a: int) -> float:
        values = []
        for shift in (delta, -delta):
            moved = gram.clone()
            moved[p, a] += shift
            moved[a, p] += shift
            values.append(fn(torch.linalg.cholesky(moved), labels, temperature=0.05).item())
        return (values[0] - values[1]) / (2 * delta)

    same_class = [(p, a) for p in range(size) for a in range(p + 1, size) if labels[p] == labels[a]]
    for p, a in same_class:
        assert slope(sincere, p, a) < 0
        assert slope(eps_supinfonce, p, a) < 0
    assert max(slope(supcon, p, a) for p, a in same_class) > 0


# --------------------------------------------------------------------------- low precision


@pytest.mark.parametrize("kind", sorted(LOSSES))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "label_list",
    [
        [0, 1, 2, 3] * 8,
        [0] * 16 + list(range(1, 17)),  # singletons: anchors without positives
        [5] * 32,  # one class: SINCERE's noise rows are fully masked
    ],
)
def test_autocast_is_finite_and_close_to_float32(
    kind: str, dtype: torch.dtype, label_list: list[int]
) -> None:
    gen = torch.Generator().manual_seed(10)
    features = torch.randn(32, 16, generator=gen)
    labels = torch.tensor(label_list)
    want = call(kind, features, labels, 0.1, 0.25)
    x = features.clone().requires_grad_(True)
    with torch.autocast("cpu", dtype=dtype):
        got = call(kind, x, labels, 0.1, 0.25)
    got.backward()
    assert torch.isfinite(got)
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert abs(got.item() - want.item()) <= 1e-2


@pytest.mark.parametrize("kind", sorted(LOSSES))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inputs_are_computed_in_float32(kind: str, dtype: torch.dtype) -> None:
    features = torch.randn(12, 8).to(dtype).requires_grad_(True)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 4, 5])
    loss = call(kind, features, labels, 0.05, 0.25)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(
        loss, call(kind, features.detach().float(), labels, 0.05, 0.25), atol=1e-6, rtol=0
    )
    loss.backward()
    assert features.grad is not None and features.grad.dtype == dtype
    assert torch.isfinite(features.grad).all()


# --------------------------------------------------------------------------- modules


@pytest.mark.parametrize(
    ("module", "kind", "kwargs"),
    [
        (SupConLoss(temperature=0.3), "supcon", {}),
        (SINCERELoss(temperature=0.3), "sincere", {}),
        (EpsSupInfoNCELoss(temperature=0.3, epsilon=0.4), "eps_supinfonce", {"epsilon": 0.4}),
    ],
)
def test_modules_match_functions(module: torch.nn.Module, kind: str, kwargs: dict) -> None:
    features = torch.randn(4, 2, 5, dtype=torch.float64)
    labels = torch.tensor([0, 1, 0, 2])
    want = call(kind, features, labels, 0.3, kwargs.get("epsilon", 0.0))
    torch.testing.assert_close(module(features, labels), want, atol=ATOL, rtol=0)
    assert "temperature=0.3" in repr(module)


# --------------------------------------------------------------------------- bad input

GOOD_FEATURES = torch.randn(4, 3)
GOOD_LABELS = torch.tensor([0, 0, 1, 1])

BAD_INPUTS = {
    "features-1d": (torch.randn(4), GOOD_LABELS, {}, "features"),
    "features-4d": (torch.randn(2, 2, 2, 3), torch.tensor([0, 1]), {}, "features"),
    "features-int": (torch.ones(4, 3, dtype=torch.int64), GOOD_LABELS, {}, "features"),
    "features-nan": (
        torch.tensor([[0.0, 1.0]] * 3 + [[math.nan, 1.0]]),
        GOOD_LABELS,
        {},
        "features",
    ),
    "features-inf": (
        torch.tensor([[0.0, 1.0]] * 3 + [[math.inf, 1.0]]),
        GOOD_LABELS,
        {},
        "features",
    ),
    "features-empty": (torch.randn(0, 3), torch.tensor([], dtype=torch.int64), {}, "features"),
    "features-one-sample": (torch.randn(1, 3), torch.tensor([0]), {}, "features"),
    "features-one-view-one-sample": (torch.randn(1, 1, 3), torch.tensor([0]), {}, "features"),
    "features-list": ([[0.0, 1.0], [1.0, 0.0]], torch.tensor([0, 0]), {}, "features"),
    "labels-short-2d": (GOOD_FEATURES, torch.tensor([0, 0, 1]), {}, "labels"),
    "labels-per-view-3d": (torch.randn(2, 2, 3), GOOD_LABELS, {}, "labels"),
    "labels-2d": (GOOD_FEATURES, GOOD_LABELS[:, None], {}, "labels"),
    "labels-float": (GOOD_FEATURES, GOOD_LABELS.double(), {}, "labels"),
    "labels-bool": (GOOD_FEATURES, GOOD_LABELS.bool(), {}, "labels"),
    "labels-list": (GOOD_FEATURES, [0, 0, 1, 1], {}, "labels"),
    "temperature-zero": (GOOD_FEATURES, GOOD_LABELS, {"temperature": 0.0}, "temperature"),
    "temperature-negative": (GOOD_FEATURES, GOOD_LABELS, {"temperature": -0.1}, "temperature"),
    "temperature-nan": (GOOD_FEATURES, GOOD_LABELS, {"temperature": math.nan}, "temperature"),
    "temperature-inf": (GOOD_FEATURES, GOOD_LABELS, {"temperature": math.inf}, "temperature"),
    "temperature-str": (GOOD_FEATURES, GOOD_LABELS, {"temperature": "0.1"}, "temperature"),
}
BAD_EPSILON = {
    "epsilon-negative": {"epsilon": -0.01},
    "epsilon-nan": {"epsilon": math.nan},
    "epsilon-inf": {"epsilon": math.inf},
}


@pytest.mark.parametrize("kind", sorted(LOSSES))
@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_raises_value_error_naming_the_argument(kind: str, case: str) -> None:
    features, labels, kwargs, name = BAD_INPUTS[case]
    with pytest.raises(ValueError, match=name):
        LOSSES[kind](features, labels, **kwargs)


@pytest.mark.parametrize("case", sorted(BAD_EPSILON))
def test_bad_epsilon_raises_value_error(case: str) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        eps_supinfonce(GOOD_FEATURES, GOOD_LABELS, **BAD_EPSILON[case])
    with pytest.raises(ValueError, match="epsilon"):
        EpsSupInfoNCELoss(**BAD_EPSILON[case])


@pytest.mark.parametrize("module", [SupConLoss, SINCERELoss, EpsSupInfoNCELoss])
@pytest.mark.parametrize("temperature", [0.0, -1.0, math.nan, math.inf])
def test_modules_validate_temperature_at_construction(module: type, temperature: float) -> None:
    with pytest.raises(ValueError, match="temperature"):
        module(temperature=temperature)


def test_module_forward_validates_inputs() -> None:
    with pytest.raises(ValueError, match="labels"):
        SINCERELoss()(GOOD_FEATURES, torch.tensor([0, 1]))
