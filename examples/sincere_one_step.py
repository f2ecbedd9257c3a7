"""Supervised contrastive steps with the SINCERE loss on one page (Feeney & Hughes 2023).

*SINCERE: Supervised Information Noise-Contrastive Estimation REvisited*, eq. 12: for an anchor
``S`` and a same-class partner ``p``, ``l(S, p) = -log exp(s_Sp/tau) / (exp(s_Sp/tau) + sum over
the other-class samples n of exp(s_Sn/tau))``, averaged over the partners of each anchor, then
over the anchors. Two views of each labelled image are anchors and partners of each other.
Random images and labels, so that the page runs anywhere in a second:

    python examples/sincere_one_step.py
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from contrastkit.data.augment import views
from contrastkit.losses import sincere
from contrastkit.models import projector, small_convnet

BATCH, SIZE, CLASSES = 16, 32, 4
TAU = 0.1


def build() -> tuple[nn.Module, nn.Module, torch.optim.Optimizer]:
    """The views, the encoder (backbone and projector) and the optimiser."""
    augment = views.make_views("simclr", SIZE)
    encoder = nn.Sequential(small_convnet(out_dim=128), projector(128, 512, 128))
    optimizer = torch.optim.SGD(encoder.parameters(), lr=0.06, momentum=0.9, weight_decay=5e-4)
    return augment, encoder, optimizer


def train_step(x: Tensor, labels: Tensor, augment: nn.Module, encoder: nn.Module,
               optimizer: torch.optim.Optimizer) -> Tensor:
    """One step on a uint8 batch ``x`` (B, 3, H, W) with class ``labels`` (B,)."""
    x_1, x_2 = augment(x)  # two views of every image, float (B, 3, SIZE, SIZE) each
    z = torch.stack([encoder(x_1), encoder(x_2)], dim=1)  # (B, 2, 128): views of one sample
    # z is L2-normalised inside; the 2B views are the anchors, each view carrying its label.
    loss = sincere(z, labels, temperature=TAU)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()


def main(steps: int = 5) -> list[float]:
    """``steps`` training steps on random labelled images; returns the losses."""
    torch.manual_seed(0)
    augment, encoder, optimizer = build()
    losses = []
    for step in range(steps):
        x = torch.randint(0, 256, (BATCH, 3, SIZE, SIZE), dtype=torch.uint8)
        labels = torch.randint(0, CLASSES, (BATCH,))
        losses.append(float(train_step(x, labels, augment, encoder, optimizer)))
        print(f"step {step}: loss {losses[-1]:.4f}")
    return losses


if __name__ == "__main__":
    main()
