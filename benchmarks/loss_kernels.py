"""SCE and InfoNCE forward + backward as the training step runs them on a GPU.

N = 256 queries and keys against a queue of K = 4096, D = 128, in bf16 (the embeddings a bf16
autocast step produces; the queue's float32 rows compared in bf16, as the methods do), inside
:func:`contrastkit.hot_path.hot_path` (no host reads) and outside it (every input check on,
as user code calls the losses). For each it prints the aten operators dispatched per call
(``torch.profiler``, nested ones included), how many of them read a value back on the host,
and the median time over ``--iters`` calls (CUDA events on a GPU).

Target of the GPU-speed issue: at most 0.5 ms per forward + backward on an H100.

Usage::

    python benchmarks/loss_kernels.py                  # CPU (float32 unless --bf16)
    python benchmarks/loss_kernels.py --device cuda    # GPU, bf16
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

import torch
from torch.profiler import ProfilerActivity, profile

from contrastkit.hot_path import hot_path
from contrastkit.losses import info_nce
from contrastkit.losses.sce import sce
from timing import median_ms

#: The operator behind every host read (item, bool, float, int of a tensor).
HOST_READS = {"aten::_local_scalar_dense", "aten::nonzero"}


def make_inputs(n: int, k: int, d: int, dtype: torch.dtype, device: torch.device):
    g = torch.Generator().manual_seed(0)
    query = torch.randn(n, d, generator=g).to(device, dtype).requires_grad_()
    key = torch.randn(n, d, generator=g).to(device, dtype)
    queue = torch.nn.functional.normalize(torch.randn(k, d, generator=g), dim=1).to(device)
    return query, key, queue


def main(argv: list[str] | None = None) -> dict[str, tuple[int, int, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bf16", action="store_true", help="bf16 inputs (default on CUDA)")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("-n", type=int, default=256)
    parser.add_argument("-k", type=int, default=4096)
    parser.add_argument("-d", type=int, default=128)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    bf16 = args.bf16 or device.type == "cuda"
    dtype = torch.bfloat16 if bf16 else torch.float32
    query, key, queue = make_inputs(args.n, args.k, args.d, dtype, device)
    cases = {
        "sce": lambda: sce(query, key, queue.to(dtype), temperature=0.1,
                           target_temperature=0.07, coeff=0.5),
        "info_nce": lambda: info_nce(query, key, queue.to(dtype), temperature=0.2),
    }
    results = {}
    print(f"N={args.n} K={args.k} D={args.d} {dtype} on {device}, torch {torch.__version__}")
    for name, loss in cases.items():
        for label, context in (("hot path", hot_path), ("checked", nullcontext)):
            def step(loss=loss, context=context) -> None:
                with context():
                    loss().backward()
                query.grad = None

            for _ in range(3):
                step()
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                step()
            ops = [e.name for e in prof.events() if e.name.startswith("aten::")]
            reads = sum(op in HOST_READS for op in ops)
            ms = median_ms(step, device, args.iters)
            results[f"{name} {label}"] = (len(ops), reads, ms)
            print(f"  {name:<9}{label:<9} {len(ops):>4} operators, {reads} host reads, "
                  f"{ms:.3f} ms forward + backward")
    return results


if __name__ == "__main__":
    main()
