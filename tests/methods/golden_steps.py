"""Fingerprints of two optimisation steps of every method, for the "same results as before" test.

``python tests/methods/golden_steps.py OUT.json`` runs, for each method of :data:`CASES`, two
steps on fixed float64 views (tiny convnet, SGD, after-step hook with EMA and queue) and writes
the loss and, per parameter, the sum and the sum of squares of its gradient. The committed
``golden_steps.json`` was written by the code *before* the GPU-speed rework (commit 612f512:
augmentation parameters on the CPU, per-step host checks, two-kernel EMA, device-read queue
pointer); ``test_golden_steps.py`` checks the current code against it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

from contrastkit.methods import SCE, MoCo, ReSSL, SimCLR, SupervisedContrastive
from contrastkit.models.factory import BackboneSpec, HeadSpec
from contrastkit.schedules import ScheduleState

TINY: dict[str, Any] = {
    "backbone": BackboneSpec(name="small_convnet", width=4, out_dim=8),
    "projector": HeadSpec(hidden_dim=8, out_dim=6),
}


def _dystress() -> Any:
    from contrastkit.losses.dystress import DySTreSSTemperature

    return DySTreSSTemperature(t_min=0.07, t_max=0.2)


def _macl() -> Any:
    from contrastkit.schedules import MACLTemperature

    return MACLTemperature()


CASES: dict[str, Any] = {
    "simclr_nt_xent": lambda: SimCLR(**TINY, temperature=0.2),
    "simclr_dcl": lambda: SimCLR(**TINY, loss="dcl", temperature=0.2),
    "simclr_hard": lambda: SimCLR(**TINY, loss="hard_contrastive", temperature=0.2, num_hard=3),
    "simclr_dystress": lambda: SimCLR(**TINY, temperature=_dystress()),
    "simclr_macl": lambda: SimCLR(**TINY, temperature=_macl()),
    "moco": lambda: MoCo(**TINY, momentum=0.9, queue_size=12),
    "ressl": lambda: ReSSL(**TINY, momentum=0.9, queue_size=12),
    "sce": lambda: SCE(**TINY, momentum=0.9, queue_size=12),
    "sce_symmetric_empty_queue": lambda: SCE(**TINY, momentum=0.9, queue_size=12,
                                            symmetric=True, queue_init="empty"),
    "sce_in_batch": lambda: SCE(**TINY, momentum=0.9, queue_size=0),
    "sincere": lambda: SupervisedContrastive(**TINY, loss="sincere"),
    "supcon": lambda: SupervisedContrastive(**TINY, loss="supcon"),
    "eps_supinfonce": lambda: SupervisedContrastive(**TINY, loss="eps_supinfonce"),
}


def inputs() -> tuple[list[torch.Tensor], torch.Tensor]:
    """Two fixed float64 views of 8 images (3x8x8) and their labels (two of each of 4)."""
    g = torch.Generator().manual_seed(123)
    views = [torch.rand(8, 3, 8, 8, generator=g, dtype=torch.float64) for _ in range(2)]
    return views, torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])


def run(name: str, steps: int = 2) -> list[dict[str, Any]]:
    """Loss and gradient fingerprints of ``steps`` optimisation steps of case ``name``."""
    torch.manual_seed(0)
    method = CASES[name]().double()
    params = [p for p in method.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    views, labels = inputs()
    out = []
    for step in range(steps):
        state = ScheduleState(step=step, total_steps=10)
        optimizer.zero_grad()
        loss = method(views, labels, state).loss
        loss.backward()
        grads = {n: p.grad for n, p in method.named_parameters() if p.grad is not None}
        out.append({
            "loss": float(loss.detach()),
            "grad_sum": {n: float(g.sum()) for n, g in grads.items()},
            "grad_sq": {n: float(g.square().sum()) for n, g in grads.items()},
        })
        optimizer.step()
        method.after_optimizer_step(state)
    return out


def main(path: str) -> None:
    with open(path, "w") as handle:
        json.dump({name: run(name) for name in CASES}, handle, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
