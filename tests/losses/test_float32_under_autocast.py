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
    dcl,
    eps_supinfonce,
    hard_contrastive,
    info_nce,
    nt_xent,
    ressl,
    sce,
    sincere,
    supcon,
    vicreg,
)

LABELS = torch.arange(16) % 5

LOSSES = {
    "info_nce_queue": lambda q, k, n: info_nce(q, k, n),
    "info_nce_in_batch": lambda q, k, n: info_nce(q, k),
    "nt_xent": lambda q, k, n: nt_xent(q, k),
    "nt_xent_dystress": lambda q, k, n: nt_xent(q, k, temperature=DySTreSSTemperature()),
    "dcl": lambda q, k, n: dcl(q, k),
    "hard_contrastive": lambda q, k, n: hard_contrastive(q, k, n, num_hard=16),
    "ressl_queue": lambda q, k, n: ressl(q, k, n, target_temperature=0.04),
    "sce_queue": lambda q, k, n: sce(q, k, n, target_temperature=0.05),
    "sce_in_batch": lambda q, k, n: sce(q, k, target_temperature=0.05),
    "supcon": lambda q, k, n: supcon(torch.stack([q, k], 1), LABELS),
    "sincere": lambda q, k, n: sincere(torch.stack([q, k], 1), LABELS),
    "eps_supinfonce": lambda q, k, n: eps_supinfonce(torch.stack([q, k], 1), LABELS),
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


@pytest.mark.parametrize("name", ["info_nce_queue", "sce_queue", "nt_xent", "supcon",
                                  "barlow_twins", "vicreg"])
def test_bf16_inputs_are_computed_as_their_float32_cast(name: str) -> None:
    q, k, neg = make(16, 32, 64, seed=4, dtype=torch.bfloat16)
    exact = [t.detach().float().requires_grad_(True) for t in (q, k, neg)]
    expected = value_and_grads(LOSSES[name], exact, autocast=False)
    got = value_and_grads(LOSSES[name], [q, k, neg], autocast=True)
    assert got[0].dtype == torch.float32 and all(g.dtype == torch.bfloat16 for g in got[1:])
    torch.testing.assert_close(got[0], expected[0], rtol=1e-6, atol=0)
    for g, e in zip(got[1:], expected[1:], strict=True):  # gradients rounded to bf16 once
        torch.testing.assert_close(g, e.to(torch.bfloat16), rtol=0, atol=0)
