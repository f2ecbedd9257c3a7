"""``python -m examples.demos.losses`` (``make demo-losses``): every contrastive loss on
random embeddings.

Prints, for each loss of :mod:`contrastkit.losses`, its value on the same random batch and
the median wall time of forward + backward. The self-supervised losses see a query/key batch
(and, for the queue variants, a memory queue); the supervised ones (SupCon, SINCERE,
epsilon-SupInfoNCE: Feeney & Hughes 2023, eqs. 3, 12, 15) see both views with random class
labels. Each loss's docstring cites its paper and equation.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import Tensor

from contrastkit.losses import (
    DySTreSSTemperature,
    PairTemperature,
    dcl,
    eps_supinfonce,
    hard_contrastive,
    info_nce,
    nt_xent,
    ressl,
    sce,
    sce_terms,
    sincere,
    supcon,
)

LossCase = tuple[str, Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]]


def self_supervised_cases(num_hard: int) -> list[LossCase]:
    dystress = DySTreSSTemperature(t_min=0.1, t_max=0.2)
    shifted = DySTreSSTemperature(t_min=0.1, t_max=0.2, shift=-0.4, scale=0.7)
    return [
        ("info_nce (in-batch)", lambda q, k, n, y: info_nce(q, k)),
        ("info_nce (MoCo queue)", lambda q, k, n, y: info_nce(q, k, n)),
        ("info_nce + DySTreSS Alg. 1", lambda q, k, n, y: info_nce(q, k, n, temperature=dystress)),
        ("nt_xent (SimCLR)", lambda q, k, n, y: nt_xent(q, k)),
        ("nt_xent + DySTreSS Alg. 2", lambda q, k, n, y: nt_xent(q, k, temperature=shifted)),
        (
            "nt_xent + PairTemperature",
            lambda q, k, n, y: nt_xent(q, k, temperature=PairTemperature(0.2, dystress)),
        ),
        ("dcl", lambda q, k, n, y: dcl(q, k)),
        (
            f"hard_contrastive (queue, {num_hard} hard)",
            lambda q, k, n, y: hard_contrastive(q, k, n, num_hard=num_hard),
        ),
        ("ressl (queue)", lambda q, k, n, y: ressl(q, k, n)),
        ("sce (in-batch)", lambda q, k, n, y: sce(q, k)),
        ("sce (queue)", lambda q, k, n, y: sce(q, k, n)),
        ("sce_terms sum (queue)", lambda q, k, n, y: sum(sce_terms(q, k, n).values())),
    ]


def supervised_cases() -> list[LossCase]:
    """SupCon, SINCERE and epsilon-SupInfoNCE on both views with the labels."""
    return [
        ("supcon", lambda q, k, n, y: supcon(torch.cat([q, k]), y)),
        ("sincere", lambda q, k, n, y: sincere(torch.cat([q, k]), y)),
        ("eps_supinfonce", lambda q, k, n, y: eps_supinfonce(torch.cat([q, k]), y, epsilon=0.25)),
    ]


def time_case(fn: Callable[[], Tensor], repeats: int) -> tuple[float, float]:
    """Value and median forward + backward milliseconds."""
    value = fn()
    value.backward()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn().backward()
        times.append(time.perf_counter() - start)
    return value.item(), 1e3 * statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Compute every contrastive loss once.")
    parser.add_argument("--batch", type=int, default=256, help="N anchors")
    parser.add_argument("--dim", type=int, default=128, help="embedding dimension D")
    parser.add_argument("--queue", type=int, default=4096, help="K queue negatives")
    parser.add_argument("--classes", type=int, default=10, help="labels of the supervised losses")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    g = torch.Generator().manual_seed(0)
    q = torch.randn(args.batch, args.dim, generator=g).requires_grad_()
    k = torch.randn(args.batch, args.dim, generator=g).requires_grad_()
    queue = torch.randn(args.queue, args.dim, generator=g)
    labels = torch.randint(args.classes, (args.batch,), generator=g).repeat(2)

    print(
        f"N={args.batch} D={args.dim} K={args.queue} classes={args.classes} "
        f"threads={args.threads} torch={torch.__version__}"
    )
    print(f"{'loss':40s} {'value':>10s} {'fwd+bwd ms':>11s}")
    for name, fn in self_supervised_cases(num_hard=min(1024, args.queue)) + supervised_cases():
        value, ms = time_case(lambda fn=fn: fn(q, k, queue, labels), args.repeats)
        print(f"{name:40s} {value:10.4f} {ms:11.2f}")


if __name__ == "__main__":
    main()
