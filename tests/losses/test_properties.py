"""Property-based checks (hypothesis) of invariances the definitions imply."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from queue_inspect import ordered

from contrastkit.losses import info_nce, nt_xent, sce, sce_terms, sincere, supcon
from contrastkit.methods.queue import MemoryQueue

SETTINGS = settings(max_examples=25, deadline=None)


def _pairs(seed: int, n: int, d: int, k: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n, d, generator=g, dtype=torch.float64)
    key = torch.randn(n, d, generator=g, dtype=torch.float64)
    neg = torch.randn(k, d, generator=g, dtype=torch.float64) if k else None
    return q, key, neg


@SETTINGS
@given(seed=st.integers(0, 10_000), n=st.integers(2, 9), d=st.integers(2, 6),
       k=st.integers(0, 12), scale=st.floats(0.01, 100.0))
def test_losses_ignore_embedding_norms(seed, n, d, k, scale):
    """Every loss L2-normalises its inputs: rescaling a row changes nothing."""
    q, key, neg = _pairs(seed, n, d, k)
    torch.testing.assert_close(info_nce(q * scale, key, neg), info_nce(q, key, neg))
    torch.testing.assert_close(sce(q, key * scale, neg), sce(q, key, neg))
    torch.testing.assert_close(nt_xent(q * scale, key), nt_xent(q, key))


@SETTINGS
@given(seed=st.integers(0, 10_000), n=st.integers(2, 9), d=st.integers(2, 6))
def test_in_batch_losses_are_invariant_to_reordering_the_pairs(seed, n, d):
    q, key, _ = _pairs(seed, n, d)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(info_nce(q[perm], key[perm]), info_nce(q, key))
    torch.testing.assert_close(nt_xent(q[perm], key[perm]), nt_xent(q, key))
    labels = torch.arange(n) % 3
    z = torch.stack([q, key], dim=1)
    torch.testing.assert_close(sincere(z[perm], labels[perm]), sincere(z, labels))
    torch.testing.assert_close(supcon(z[perm], labels[perm]), supcon(z, labels))


@SETTINGS
@given(seed=st.integers(0, 10_000), n=st.integers(2, 8), d=st.integers(2, 6),
       k=st.integers(0, 10), coeff=st.floats(0.0, 1.0))
def test_sce_proposition_1_holds_for_any_coefficient(seed, n, d, k, coeff):
    q, key, neg = _pairs(seed, n, d, k)
    terms = sce_terms(q, key, neg)
    expected = coeff * terms["info_nce"] + (1 - coeff) * (terms["ressl"] + terms["ceil"])
    torch.testing.assert_close(sce(q, key, neg, coeff=coeff), expected, rtol=1e-9, atol=1e-9)
    assert float(terms["ceil"]) >= 0.0


@SETTINGS
@given(size=st.integers(1, 17), batches=st.lists(st.integers(0, 23), min_size=1, max_size=8))
def test_queue_equals_writing_rows_one_by_one(size, batches):
    queue = MemoryQueue(size, 2, normalize=False)
    history: list[torch.Tensor] = []
    for i, b in enumerate(batches):
        rows = torch.arange(2 * b, dtype=torch.float32).reshape(b, 2) + 1000 * i
        queue.enqueue(rows)
        history.extend(rows)
    expected = torch.stack(history[-size:]) if history else torch.zeros(0, 2)
    torch.testing.assert_close(ordered(queue), expected)
    assert queue.num_valid == min(size, len(history))
