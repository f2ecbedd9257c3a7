"""Retrieval recall@k (SCE Table 19) against a brute-force loop."""

from __future__ import annotations

import pytest
import torch

from contrastkit.eval import retrieval_recall


def brute_force_recall(xtr, ytr, xte, yte, k):
    xtr = xtr.double() / xtr.double().norm(dim=1, keepdim=True)
    xte = xte.double() / xte.double().norm(dim=1, keepdim=True)
    hits = 0
    for q in range(xte.shape[0]):
        sims = [float(xte[q] @ xtr[i]) for i in range(xtr.shape[0])]
        nearest = sorted(range(len(sims)), key=lambda i: -sims[i])[:k]
        hits += any(int(ytr[i]) == int(yte[q]) for i in nearest)
    return hits / xte.shape[0]


@pytest.mark.parametrize("backend", ["torch", "faiss"])
def test_recall_matches_brute_force(backend):
    if backend == "faiss":
        pytest.importorskip("faiss")
    g = torch.Generator().manual_seed(3)
    centers = torch.randn(6, 12, generator=g)
    ytr = torch.randint(0, 6, (150,), generator=g)
    yte = torch.randint(0, 6, (40,), generator=g)
    xtr = centers[ytr] + 1.5 * torch.randn(150, 12, generator=g)
    xte = centers[yte] + 1.5 * torch.randn(40, 12, generator=g)
    out = retrieval_recall(xtr, ytr, xte, yte, ks=(1, 5, 10), backend=backend, chunk_size=9)
    assert set(out) == {"recall@1", "recall@5", "recall@10"}
    for k in (1, 5, 10):
        assert out[f"recall@{k}"] == pytest.approx(brute_force_recall(xtr, ytr, xte, yte, k))
    assert out["recall@1"] <= out["recall@5"] <= out["recall@10"]
    assert out["recall@1"] < 1.0


def test_recall_hand_case():
    xtr = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
    ytr = torch.tensor([0, 1, 1])
    xte = torch.tensor([[2.0, 0.1], [0.1, 3.0]])  # scale does not matter (cosine)
    yte = torch.tensor([1, 1])
    # query 0: neighbours 0 (label 0), 1 (label 1); query 1: neighbour 2 (label 1) first.
    out = retrieval_recall(xtr, ytr, xte, yte, ks=(1, 2))
    assert out == {"recall@1": 0.5, "recall@2": 1.0}


def test_recall_bad_inputs():
    x = torch.randn(5, 3)
    y = torch.zeros(5, dtype=torch.long)
    with pytest.raises(ValueError, match="larger than the bank"):
        retrieval_recall(x, y, x, y, ks=(1, 6))
    with pytest.raises(ValueError, match="test_labels has 4 labels"):
        retrieval_recall(x, y, x, y[:4])
    with pytest.raises(ValueError, match="ks"):
        retrieval_recall(x, y, x, y, ks=())
