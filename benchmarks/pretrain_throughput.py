"""The real `contrastkit pretrain` loop against the model-only step, interleaved in one process.

Runs ``contrastkit pretrain`` (LightningCLI, data module and loader workers, views on the
device, method, optimiser and schedule, logging, checkpoint callbacks) for 2 epochs and, after
``--warmup`` steps, alternates blocks of ``--block`` loop steps with blocks of ``--block``
model-only steps (a copy of the same method, its own SGD, views made beforehand, no Lightning:
``benchmarks/train_step.py``'s ``MethodStep``), so both see the same load on a shared machine.
A loop block never crosses an epoch's end; the epoch-end cost (checkpoint, callbacks) is
reported on its own, between epochs 1 and 2 (``bench_gpu.py``'s ``loop_figures``).

Goal of the GPU-speed issue: SCE, CIFAR-10, ResNet-18, batch 256, bf16 on one H100 at
<= 3.0 s per epoch (195 steps), loop overhead <= 10 %.

Usage (arguments after ``--`` go to ``contrastkit pretrain``)::

    python benchmarks/pretrain_throughput.py --block 3 --warmup 2 -- \\
        --config configs/repro/gpu/table6_sce.yaml --data.root ../shared/data/cifar10-jpg.tar.gz \\
        --trainer.accelerator cpu --data.batch_size 32 --data.subset 320

    source .carry/env.sh && python3 benchmarks/pretrain_throughput.py -- \\
        --config configs/repro/gpu/table6_sce.yaml --data.root .carry/cifar10-jpg.tar.gz
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_gpu import loop_figures


def main(argv: list[str] | None = None) -> dict[str, object]:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, pretrain_args = (argv[: argv.index("--")], argv[argv.index("--") + 1:]) \
        if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block", type=int, default=20, help="steps per alternating block")
    parser.add_argument("--warmup", type=int, default=10, help="untimed loop steps first")
    args = parser.parse_args(own)
    figures = loop_figures(pretrain_args, args.block, args.warmup)
    for name, value in figures.items():
        print(f"{name:<28} {value}")
    return figures


if __name__ == "__main__":
    main()
