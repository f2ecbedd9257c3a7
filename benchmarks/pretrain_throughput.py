"""Throughput of the real `contrastkit pretrain` loop next to the model-only step, one process.

Runs ``contrastkit pretrain`` (LightningCLI, data module and loader workers, views on the
device, method, optimiser and schedule, logging, checkpoint callbacks) for ``--steps``
optimiser steps after ``--warmup`` untimed ones, and times the steps with the wall clock
(synchronising the device at the two ends of the timed window only). In the same process it
then times, on the same device and precision, the same method's step without Lightning
(``benchmarks/train_step.py``'s ``MethodStep``: forward, backward, SGD, EMA and queue; views
made beforehand) and the two-view augmentation alone. The loop overhead is the ratio of the
loop's images/s to the model-only step's (and to model step + augmentation).

Goal of the GPU-speed issue: SCE, CIFAR-10, ResNet-18, batch 256, bf16 on one H100 at
<= 3.0 s per epoch (195 steps), i.e. >= 16,600 images/s, loop overhead <= 10 %.

Usage (any extra arguments after ``--`` go to ``contrastkit pretrain``)::

    python benchmarks/pretrain_throughput.py --steps 20 --warmup 5 -- \\
        --config configs/repro/gpu/table6_sce.yaml --data.root ../shared/data/cifar10-jpg.tar.gz \\
        --trainer.accelerator cpu --trainer.precision 32 --data.batch_size 32

    source .carry/env.sh && python3 benchmarks/pretrain_throughput.py --steps 300 -- \\
        --config configs/repro/gpu/table6_sce.yaml --data.root .carry/cifar10-jpg.tar.gz \\
        --data.num_workers 12
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import lightning as L
import torch

sys.path.insert(0, str(Path(__file__).parent))

from contrastkit.train.cli import build
from timing import median_ms
from train_step import MethodStep


class StepTimer(L.Callback):
    """Wall time of optimiser steps ``warmup`` to ``warmup + steps`` (device synchronised at
    both ends of that window only)."""

    def __init__(self, warmup: int, steps: int) -> None:
        self.warmup, self.steps = warmup, steps
        self.start: float | None = None
        self.seconds: float | None = None
        self.images = 0

    def _sync(self, pl_module) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.warmup and self.start is None:
            self._sync(pl_module)
            self.start = time.perf_counter()
        if self.start is not None and self.seconds is None:
            self.images += int(batch[1].shape[0])

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.start is not None and trainer.global_step >= self.warmup + self.steps:
            self._sync(pl_module)
            self.seconds = time.perf_counter() - self.start
            trainer.should_stop = True


def main(argv: list[str] | None = None) -> dict[str, float]:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, pretrain_args = (argv[: argv.index("--")], argv[argv.index("--") + 1:]) \
        if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="timed optimiser steps")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    args = parser.parse_args(own)
    output = tempfile.mkdtemp(prefix="contrastkit-throughput-")
    cli, _ = build([*pretrain_args, "--trainer.max_epochs", "1000",
                    "--trainer.max_steps", str(args.warmup + args.steps + 1),
                    "--trainer.enable_progress_bar", "false", "--output", output])
    timer = StepTimer(args.warmup, args.steps)
    cli.trainer.callbacks.append(timer)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    if timer.seconds is None:
        raise SystemExit("the run ended before the timed window: give more data or fewer steps")
    module = cli.model
    device = module.device
    batch = cli.datamodule.batch_size
    loop = timer.images / timer.seconds

    # the same method, views made beforehand, no Lightning: the model-only step
    bf16 = "bf16" in str(cli.trainer.precision)
    method = module.method  # trained a few steps: as good as new for timing
    images = next(iter(cli.datamodule.train_dataloader()))[0][:batch].to(device)
    with torch.no_grad():
        views = module.train_views(images)
        if module._channels_last:
            views = [v.contiguous(memory_format=torch.channels_last) for v in views]
    labels = torch.zeros(batch, dtype=torch.long, device=device)
    runner = MethodStep(method, views, labels, total_steps=10**6, device=device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)
    with autocast:
        step_ms = median_ms(runner.step, device, max(10, args.steps // 2), warmup=3)
    with torch.no_grad():
        aug_ms = median_ms(lambda: module.train_views(images), device, 20, warmup=3)
    model = 1000 * batch / step_ms
    both = 1000 * batch / (step_ms + aug_ms)
    print(f"\n{type(module.method).__name__}, batch {batch}, {device}, "
          f"precision {cli.trainer.precision}, torch {torch.__version__}")
    print(f"contrastkit pretrain loop : {loop:10,.0f} images/s  "
          f"({1000 * timer.seconds / args.steps:.1f} ms per step over {args.steps} steps)")
    print(f"model step only           : {model:10,.0f} images/s  ({step_ms:.1f} ms)")
    print(f"model step + augmentation : {both:10,.0f} images/s  (augmentation {aug_ms:.1f} ms)")
    print(f"loop / model step: {loop / model:.3f}   loop / (model step + augmentation): "
          f"{loop / both:.3f}")
    return {"loop": loop, "model": model, "model_and_augmentation": both}


if __name__ == "__main__":
    main()
