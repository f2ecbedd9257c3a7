"""SimCLR steps with the DySTreSS temperature on one page: Algorithm 3 of Manna et al. 2023.

Manna et al. 2023, *Dynamically Scaled Temperature in Self-Supervised Contrastive Learning*.
Every block carries the lines of the pseudo-code it implements; the loss is SimCLR's NT-Xent
with every logit divided by the temperature of its pair, ``tau(s) = t_min + (t_max - t_min)
(1 + cos(pi (1 + s))) / 2`` of the detached cosine similarity ``s`` (Alg. 1). Random images, so
that the page runs anywhere in a second:

    python examples/simclr_dystress_one_step.py
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from contrastkit.data.augment import views
from contrastkit.losses import DySTreSSTemperature, nt_xent
from contrastkit.models import projector, small_convnet

BATCH, SIZE = 16, 32  # N: batch size, image side
TEMPERATURE = DySTreSSTemperature(t_min=0.1, t_max=0.2)  # tmin, tmax


def build() -> tuple[nn.Module, nn.Module, torch.optim.Optimizer]:
    """The views, the encoder f (backbone and projector) and the optimiser."""
    augment = views.make_views("simclr", SIZE)  # SimCLR's augmentations, drawn twice
    f = nn.Sequential(small_convnet(out_dim=128), projector(128, 512, 128))
    optimizer = torch.optim.SGD(f.parameters(), lr=0.06, momentum=0.9, weight_decay=5e-4)
    return augment, f, optimizer


def train_step(x: Tensor, augment: nn.Module, f: nn.Module,
               optimizer: torch.optim.Optimizer) -> Tensor:
    """One step on a uint8 batch ``x`` (N, 3, H, W); returns the loss."""
    x_1, x_2 = augment(x)  # x_1, x_2 = augment(x): float (N, 3, SIZE, SIZE) each
    z_1, z_2 = f(x_1), f(x_2)  # z_1, z_2 = f(x_1), f(x_2): (N, 128) each
    # L2-normalise; the 2N x 2N cosine similarities without the diagonal; temp = tau(s.detach());
    # s = s / temp; cross-entropy with the other view as the label: all inside nt_xent.
    loss = nt_xent(z_1, z_2, temperature=TEMPERATURE)
    optimizer.zero_grad()
    loss.backward()  # loss.backward()
    optimizer.step()  # optimizer.step()
    return loss.detach()


def main(steps: int = 5) -> list[float]:
    """``steps`` training steps on random images; returns the losses."""
    torch.manual_seed(0)
    augment, f, optimizer = build()
    losses = []
    for step in range(steps):  # for x in loader
        x = torch.randint(0, 256, (BATCH, 3, SIZE, SIZE), dtype=torch.uint8)
        losses.append(float(train_step(x, augment, f, optimizer)))
        print(f"step {step}: loss {losses[-1]:.4f}")
    return losses


if __name__ == "__main__":
    main()
