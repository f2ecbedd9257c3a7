"""Every loss computes in float32 inside a bf16 autocast region, its logits included: float32
inputs give the loss and the gradients they give without autocast (relative 1e-6), and bf16
inputs give what their exact float32 cast gives."""

from __future__ import annotations

import pytest
import torch
from loss_inputs import make

from contrastkit.losses import (
    DySTreSSTemperature,
    barlow_twins,
    byol,
    dcl,
    dclw,
    dino,
    eps_supinfonce,
    hard_contrastive,
    info_nce,
    moco_v3,
    nnclr,
    nt_xent,
    ressl,
    sce,
    sincere,
    sinkhorn_knopp,
    supcon,
    swav,
    vicreg,
    wmse,
)
from contrastkit.losses.wmse import draw_sub_batches

LABELS = torch.arange(16) % 5
#: One fixed partition of the 16 rows into two whitening sub-batches (W-MSE draws at random).
SUB_BATCHES = draw_sub_batches(16, 8, generator=torch.Generator().manual_seed(0))

LOSSES = {
    "info_nce_queue": lambda q, k, n: info_nce(q, k, n),
    "info_nce_in_batch": lambda q, k, n: info_nce(q, k),
    "nt_xent": lambda q, k, n: nt_xent(q, k),
    "nt_xent_dystress": lambda q, k, n: nt_xent(q, k, temperature=DySTreSSTemperature()),
    "dcl": lambda q, k, n: dcl(q, k),
    "dclw": lambda q, k, n: dclw(q, k),
    "byol": lambda q, k, n: byol(q, k),
    "moco_v3": lambda q, k, n: moco_v3(q, torch.cat([n, k]), temperature=0.2, key_offset=64),
    # whitening (covariance, Cholesky factor, triangular solve) of 4 of the 32 dimensions
    "wmse": lambda q, k, n: wmse(q[:, :4], k[:, :4], w_size=8, sub_batches=SUB_BATCHES),
    "hard_contrastive": lambda q, k, n: hard_contrastive(q, k, n, num_hard=16),
    "ressl_queue": lambda q, k, n: ressl(q, k, n, target_temperature=0.04),
    "sce_queue": lambda q, k, n: sce(q, k, n, target_temperature=0.05),
    "sce_in_batch": lambda q, k, n: sce(q, k, target_temperature=0.05),
    "supcon": lambda q, k, n: supcon(torch.stack([q, k], 1), LABELS),
    "sincere": lambda q, k, n: sincere(torch.stack([q, k], 1), LABELS),
    "eps_supinfonce": lambda q, k, n: eps_supinfonce(torch.stack([q, k], 1), LABELS),
    # q, k as prototype scores / head outputs (K = 32); n's rows as a centre or neighbours
    "swav": lambda q, k, n: swav([q, k], [sinkhorn_knopp(q), sinkhorn_knopp(k)]),
    "dino": lambda q, k, n: dino([q, k], [k, q], n[0]),
    "nnclr": lambda q, k, n: nnclr(n[:16], n[16:32], q, k),
    "barlow_twins": lambda q, k, n: barlow_twins(q, k),
    "vicreg": lambda q, k, n: vicreg(q, k, global_views=(n[:32], n[32:])),
}


def value_and_grads(loss, inputs, autocast: bool) -> list[torch.Tensor]:
    """The loss (autocast to bf16 on the CPU or not) and the gradients of its inputs (backward
    outside the region, as Lightning and PyTorch's AMP recipe run it)."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        value = loss(*inputs)
    grads = torch.autograd.grad(value, inputs, allow_unused=True)
    return [value.detach(), *(g for g in grads if g is not None)]


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_float32_inputs_give_the_float32_loss_under_bf16_autocast(name: str) -> None:
    # Near-parallel query and key: cosines close to 1, where bf16 rounds by about 0.002.
    q, k, neg = make(16, 32, 64, seed=3, dtype=torch.float32, grad=False)
    k = (q + 0.05 * k).requires_grad_(True)
    inputs = [q.requires_grad_(True), k, neg.requires_grad_(True)]
    expected = value_and_grads(LOSSES[name], inputs, autocast=False)
    got = value_and_grads(LOSSES[name], inputs, autocast=True)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype == torch.float32
        torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-6 * e.abs().max().item())


@pytest.mark.parametrize("name", ["info_nce_queue", "sce_queue", "nt_xent", "supcon", "byol",
                                  "moco_v3", "wmse", "barlow_twins", "vicreg"])
def test_bf16_inputs_are_computed_as_their_float32_cast(name: str) -> None:
    q, k, neg = make(16, 32, 64, seed=4, dtype=torch.bfloat16)
    exact = [t.detach().float().requires_grad_(True) for t in (q, k, neg)]
    expected = value_and_grads(LOSSES[name], exact, autocast=False)
    got = value_and_grads(LOSSES[name], [q, k, neg], autocast=True)
    assert got[0].dtype == torch.float32 and all(g.dtype == torch.bfloat16 for g in got[1:])
    torch.testing.assert_close(got[0], expected[0], rtol=1e-6, atol=0)
    for g, e in zip(got[1:], expected[1:], strict=True):  # gradients rounded to bf16 once
        torch.testing.assert_close(g, e.to(torch.bfloat16), rtol=0, atol=0)
