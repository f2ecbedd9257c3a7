"""SCE training steps on one page: Algorithm 1 of the SCE supplement (appendix A), in plain PyTorch.

Denize et al. 2023, *Similarity Contrastive Estimation*. Every block below carries the line
numbers of the pseudo-code it implements; the loss is eqs. 5 and 8-10 (``contrastkit.losses.sce``;
``sce_reference`` beside it writes them one per line). contrastkit's engine (``contrastkit
pretrain``) runs the same step with the additions a real run needs (distributed gather,
symmetric loss, multi-crop, mixed precision, checkpoints). The images here are random so
that the page runs anywhere in a second:

    python examples/sce_one_step.py
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from contrastkit.data.augment import views
from contrastkit.losses import sce
from contrastkit.methods.queue import MemoryQueue
from contrastkit.models import MomentumBranch, cosine_momentum, projector, small_convnet

# 1-10: the settings (SCE Table 21, CIFAR row, at a toy scale).
BATCH, SIZE = 16, 32  # bsz, image side
QUEUE_SIZE = 256  # queue: memory buffer of K keys
TAU, TAU_M = 0.1, 0.05  # tau: online temperature, tau_m: momentum (target) temperature
LAMBDA = 0.5  # lambda: coefficient between the contrastive and relational aspects
BASE_MOMENTUM = 0.99  # momentum of the target, annealed to 1 (SCE appendix D.1)


def build() -> tuple[nn.Module, nn.Module, MomentumBranch, MemoryQueue, torch.optim.Optimizer]:
    """The views, the online branch, its momentum copy, the queue and the optimiser."""
    # T1, T2: SCE's experiments give the online branch the strong augmentations and the target
    # branch the weak ones (views "sce", as ReSSL does); the pseudo-code's comments list them
    # the other way round.
    make_views = views.make_views("sce", SIZE)
    online = nn.Sequential(small_convnet(out_dim=128), projector(128, 512, 128))  # f1, g1
    target = MomentumBranch(online)  # f2, g2: an EMA copy of f1, g1, without gradient
    queue = MemoryQueue(QUEUE_SIZE, 128, init="random", seed=0)  # L2-normalised keys
    optimizer = torch.optim.SGD(online.parameters(), lr=0.06, momentum=0.9, weight_decay=5e-4)
    return make_views, online, target, queue, optimizer


def train_step(
    x: Tensor, make_views: nn.Module, online: nn.Module, target: MomentumBranch,
    queue: MemoryQueue, optimizer: torch.optim.Optimizer, momentum: float,
) -> tuple[Tensor, Tensor]:
    """One step on a uint8 batch ``x`` (B, 3, H, W); returns the loss and the keys ``z2``."""
    x1, x2 = make_views(x)  # 14: x1, x2 = T1(x), T2(x), float (B, 3, SIZE, SIZE) each
    z1 = online(x1)  # 15: z1 = g1(f1(x1)), (B, 128), with gradient
    z2 = target(x2)  # 15, 17: z2 = g2(f2(x2)), (B, 128), stopgrad
    # 19-31: sim2 = [0 | z2 . queue] / tau_m; s2 = softmax(sim2) (eq. 5, which masks the
    # positive where the pseudo-code gives it a zero logit); w2 = lambda one_hot + (1 - lambda)
    # s2 (eq. 8); sim1 = [z1 . z2 | z1 . queue] / tau; p1 = softmax(sim1) (eq. 9);
    # loss = cross_entropy(p1, w2) (eq. 10). sce L2-normalises z1 and z2 first.
    loss = sce(z1, z2, queue.negatives(), temperature=TAU, target_temperature=TAU_M,
               coeff=LAMBDA)
    optimizer.zero_grad()
    loss.backward()  # 32
    optimizer.step()  # 34-35: update(f1.params), update(g1.params)
    target.update(momentum)  # 36-37: momentum_update(f2, f1), momentum_update(g2, g1)
    queue.enqueue(z2)  # 38: fifo_update(queue, z2), after the step that used the old queue
    return loss.detach(), z2


def main(steps: int = 5) -> list[float]:
    """``steps`` training steps on random images; returns the losses."""
    torch.manual_seed(0)
    make_views, online, target, queue, optimizer = build()
    losses = []
    for step in range(steps):  # 12-13: for each epoch, for each batch x of the loader
        x = torch.randint(0, 256, (BATCH, 3, SIZE, SIZE), dtype=torch.uint8)
        momentum = cosine_momentum(step, steps, BASE_MOMENTUM)
        loss, _ = train_step(x, make_views, online, target, queue, optimizer, momentum)
        losses.append(float(loss))
        print(f"step {step}: loss {float(loss):.4f}, target momentum {momentum:.4f}")
    return losses


if __name__ == "__main__":
    main()
