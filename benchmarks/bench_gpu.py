"""`make bench-gpu`: the CUDA-only tests, then every figure of the GPU-speed goal, in one JSON
and one markdown table that says which goal each figure meets.

On a CUDA machine (prepared as ``../shared/gpu/README.md`` says: ``source .carry/env.sh``) it
runs the CUDA-only tests, then measures, for ``configs/repro/gpu/table6_sce.yaml`` (SCE,
CIFAR-10 JPEG archive, ResNet-18, batch 256, bf16):

* the two-view augmentation of a 256-image batch (ms);
* the SCE loss forward + backward, N 256, K 4096, D 128 under bf16 autocast (ms);
* the real ``contrastkit pretrain`` loop for 2 epochs: loop steps and model-only steps (the
  same method copied, its own SGD, views made beforehand, no Lightning) timed in alternating
  blocks in one process, each loop block inside one epoch (never across its end), so the
  loop-overhead ratio sees the same load; the epoch-end cost (checkpoint, callbacks) between
  epochs 1 and 2 on its own; seconds per epoch: epoch 2 plus that epoch end (the steady
  state; model-only blocks excluded), and epoch 1 on its own (``first_epoch_s``: warm-up
  included); peak GPU memory; the loss after 2 epochs;
* the same 2 epochs with the captured step (``model.performance.step captured``: the step
  recorded once as a CUDA graph and replayed, ``captured_*`` figures), with the training
  split kept on the device too (``data.on_device``, ``captured_on_device_*``), and with the
  step's forward compiled as well (``compiled_*``; ``*_setup_s``: warm-up, compilation and
  capture). Their
  model-only blocks replay the step outside Lightning (``CapturedStep.run`` on the block's
  batch) from a saved state that is put back afterwards, so the run itself is not changed;
* estimated kernel launches per step (``launch_count.py``).

On a CPU it runs the same measurements at a small size (digits, batch 32, ResNet-18 of
width 8; no compiled variant) and says so: the figures then check the command, not the goal.

Usage: ``make bench-gpu [BENCH_OUT=folder]`` or
``python benchmarks/bench_gpu.py --out folder [--skip-tests]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch

sys.path.insert(0, str(Path(__file__).parent))

import launch_count
from contrastkit.cli.pretrain import build
from contrastkit.hot_path import hot_path
from contrastkit.losses import sce
from step_graph import State
from timing import median_ms
from train_step import MethodStep

ROOT = Path(__file__).resolve().parents[1]
CUDA_TESTS = ["tests/data/test_augment.py", "tests/data/test_augment_device.py",
              "tests/data/test_views.py", "tests/train/test_captured_step_cuda.py"]
#: The goals of issues 21 and 34 (seconds per epoch: 2.5, target 1.5): each figure at most this.
GOALS = {"seconds_per_epoch": 2.5, "loop_overhead": 0.10, "loss_ms": 0.5,
         "augmentation_ms": 2.0, "launches_per_step": 600}
#: The variants of the loop measured: name prefix -> extra pretrain arguments.
VARIANTS = {"": [], "captured_": ["--model.performance.step", "captured"],
            "captured_on_device_": ["--model.performance.step", "captured",
                                    "--data.on_device", "true"],
            "compiled_": ["--model.performance.step", "captured", "--data.on_device", "true",
                          "--model.performance.compile", "true"]}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Interleaved(L.Callback):
    """Times blocks of ``block`` loop steps, each followed by ``block`` model-only steps of a
    copy of the method; loop blocks stay inside an epoch. Also times each epoch from its start
    to the next one's (model-only time removed) and the gap between an epoch's last batch and
    the next epoch's first batch (the epoch end)."""

    def __init__(self, block: int, warmup: int) -> None:
        self.block, self.warmup = block, warmup
        self.loop_ms: list[float] = []
        self.model_ms: list[float] = []
        self.epoch_starts: list[float] = []
        self.aside = 0.0  # seconds spent in model-only blocks
        self.aside_at_start: list[float] = []
        self.last_batch_end: float | None = None
        self.aside_at_last_batch: list[float] = []
        self.epoch_end_s: list[float] = []
        self.block_start: float | None = None
        self.block_steps = 0
        self.runner: MethodStep | None = None
        self.setup_s: float | None = None

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        _sync(pl_module.device)
        now = time.perf_counter()
        if self.last_batch_end is not None:
            self.epoch_end_s.append(now - self.last_batch_end)
        self.epoch_starts.append(now)
        self.aside_at_start.append(self.aside)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        left = trainer.num_training_batches - batch_idx
        if (self.block_start is None and trainer.global_step >= self.warmup
                and left >= self.block):
            _sync(pl_module.device)
            self.block_start, self.block_steps = time.perf_counter(), 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        device = pl_module.device
        if self.block_start is not None:
            self.block_steps += 1
            if self.block_steps == self.block:
                _sync(device)
                self.loop_ms.append(1000 * (time.perf_counter() - self.block_start) / self.block)
                self.block_start = None
                self._model_block(pl_module, batch)
        if batch_idx == trainer.num_training_batches - 1:
            _sync(device)
            self.last_batch_end = time.perf_counter()
            self.aside_at_last_batch.append(self.aside)

    def _model_block(self, module, batch) -> None:
        start = time.perf_counter()
        device = module.device
        if module._captured is not None:
            self._replay_block(module, batch)
            self.aside += time.perf_counter() - start
            return
        if self.runner is None:
            with torch.no_grad():
                views = module.train_views(batch[0])
                if module._channels_last:
                    views = [v.contiguous(memory_format=torch.channels_last) for v in views]
            method = copy.deepcopy(module.method)
            self.runner = MethodStep(method, views, batch[1], total_steps=10**6, device=device)
        bf16 = "bf16" in str(module.trainer.precision)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            self.runner.step()  # untimed: caches after the loop's steps
            _sync(device)
            begin = time.perf_counter()
            for _ in range(self.block):
                self.runner.step()
            _sync(device)
        self.model_ms.append(1000 * (time.perf_counter() - begin) / self.block)
        self.aside += time.perf_counter() - start


    def _replay_block(self, module, batch) -> None:
        """Captured runs: ``block`` replays of the step outside Lightning, from a saved state
        put back afterwards (the run goes on as if they had not happened)."""
        captured, device = module._captured, module.device
        saved = State(module, captured)
        images, labels = batch[0].to(device), batch[1].to(device)
        bf16 = "bf16" in str(module.trainer.precision)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            captured.run(images, labels)  # untimed
            _sync(device)
            begin = time.perf_counter()
            for _ in range(self.block):
                captured.run(images, labels)
            _sync(device)
        self.model_ms.append(1000 * (time.perf_counter() - begin) / self.block)
        saved.restore()
        self.setup_s = captured.setup_s


def _median(values: list[float]) -> float | None:
    return sorted(values)[len(values) // 2] if values else None


def loop_figures(args: list[str], block: int, warmup: int) -> dict[str, Any]:
    """The real loop for 2 epochs with interleaved model-only blocks (class Interleaved)."""
    with tempfile.TemporaryDirectory() as folder:
        cli, _ = build([*args, "--trainer.max_epochs", "2", "--output", f"{folder}/run"])
        timer = Interleaved(block, warmup)
        cli.trainer.callbacks.append(timer)
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
        loss = cli.trainer.callback_metrics.get("train/loss")
        # not cli.model.device: the trainer's teardown has moved the module back to the CPU
        on_cuda = cli.trainer.strategy.root_device.type == "cuda"
    starts, aside = timer.epoch_starts, timer.aside_at_start
    first_s = (starts[1] - starts[0]) - (aside[1] - aside[0]) if len(starts) > 1 else None
    # The steady epoch is epoch 2 (epoch 1 also pays cuDNN autotuning, allocator growth and the
    # workers' start) plus the epoch end measured between epochs 1 and 2.
    epoch_s = None
    if len(starts) > 1 and len(timer.aside_at_last_batch) > 1 and timer.epoch_end_s:
        epoch_s = (timer.last_batch_end - starts[1]
                   - (timer.aside_at_last_batch[1] - aside[1]) + timer.epoch_end_s[0])
    loop, model = _median(timer.loop_ms), _median(timer.model_ms)
    ratios = [a / b for a, b in zip(timer.loop_ms, timer.model_ms, strict=False)]
    return {
        "loop_step_ms": loop, "model_step_ms": model,
        "loop_overhead": (_median(ratios) - 1.0) if ratios else None,
        "loop_over_model_per_block": ratios,
        "epoch_end_s": timer.epoch_end_s[0] if timer.epoch_end_s else None,
        "seconds_per_epoch": epoch_s, "first_epoch_s": first_s,
        "peak_gpu_memory_gib": (torch.cuda.max_memory_allocated() / 2**30
                                if on_cuda else None),
        "loss_after_2_epochs": float(loss) if loss is not None else None,
        "blocks": len(ratios), "setup_s": timer.setup_s,
    }


def kernel_figures(device: torch.device, batch: int) -> dict[str, float]:
    """Augmentation (two SCE views) and SCE loss (N 256, K 4096, D 128, bf16) times."""
    from contrastkit.data.augment.views import build_train_views
    from contrastkit.data.specs import ViewsSpec

    views = build_train_views(ViewsSpec(size=32, normalize="cifar10"), ("strong", "weak"))
    views = views.to(device)
    images = torch.randint(0, 256, (batch, 3, 32, 32), dtype=torch.uint8, device=device)
    with torch.no_grad():
        aug = median_ms(lambda: views(images), device, 20, warmup=3)
    query = torch.randn(256, 128, device=device, requires_grad=True)
    key, queue = torch.randn(256, 128, device=device), torch.randn(4096, 128, device=device)

    def loss_step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16), hot_path():
            value = sce(query, key, queue, temperature=0.2, target_temperature=0.1)
        value.backward()

    return {"augmentation_ms": aug, "loss_ms": median_ms(loss_step, device, 50, warmup=5)}


def run_cuda_tests() -> dict[str, Any]:
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-k", "cuda", *CUDA_TESTS]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    return {"command": " ".join(command[2:]), "returncode": done.returncode,
            "summary": (done.stdout.strip().splitlines() or [""])[-1]}


def goal_of(name: str) -> float | None:
    """The goal of figure ``name`` (a variant's figure has the eager one's goal)."""
    prefix = max((p for p in VARIANTS if name.startswith(p)), key=len)
    return GOALS.get(name.removeprefix(prefix))


def verdict(name: str, value: float | None) -> str:
    if value is None:
        return "not measured"
    return "met" if value <= goal_of(name) else "not met"


def markdown(result: dict[str, Any]) -> str:
    figures = result["figures"]
    rows = [f"Ran on {result['device']} (torch {result['torch']}, {result['date']}); "
            + ("CUDA-only tests: " + result["tests"]["summary"] if "tests" in result
               else "CUDA-only tests not run."),
            "", "| figure | value | goal | verdict |", "|---|---:|---:|---|"]
    for name, value in figures.items():
        if isinstance(value, list):
            continue
        goal = goal_of(name)
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        rows.append(f"| {name} | {shown} | {goal if goal is not None else ''} | "
                    f"{verdict(name, value) if goal is not None else ''} |")
    if not result["cuda"]:
        rows += ["", "**Ran on a CPU at a small size: the figures check the command, not the "
                 "GPU goals.**"]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench-gpu", help="folder for the JSON and table")
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--eager-only", action="store_true",
                        help="the eager loop only (no captured or compiled variant)")
    opts = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    archive = next((p for p in (ROOT / ".carry/cifar10-jpg.tar.gz",
                                ROOT.parent / "shared/data/cifar10-jpg.tar.gz") if p.exists()),
                   None)
    if cuda and archive is not None:
        args = ["--config", "configs/repro/gpu/table6_sce.yaml", "--data.root", str(archive),
                "--trainer.enable_progress_bar", "false"]
        block, warmup, batch = 20, 10, 256
        counted = [*launch_count.DEFAULT_ARGS, "--trainer.accelerator", "gpu"]
    else:
        args = [*launch_count.DEFAULT_ARGS, "--data.subset", "320", "--data.batch_size", "32"]
        if cuda:
            args += ["--trainer.accelerator", "gpu"]
        block, warmup, batch = 3, 2, 32
        counted = launch_count.DEFAULT_ARGS
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if cuda else "a CPU (small size)",
        "cuda": cuda, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                     time.gmtime()),
    }
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after each part: a command stopped by its timeout keeps the rest
        (out / "bench_gpu.json").write_text(json.dumps(result, indent=1))

    if cuda and not opts.skip_tests:
        result["tests"] = run_cuda_tests()
        save()
    figures: dict[str, Any] = kernel_figures(device, batch)
    result["figures"] = figures
    save()
    for prefix, extra in VARIANTS.items():
        if (prefix and opts.eager_only) or (prefix == "compiled_" and not cuda):
            continue  # compiling the step takes many minutes on a CPU: CUDA only
        loop = loop_figures([*args, *extra], block, warmup)
        if not prefix:
            loop.pop("setup_s")
        figures.update({prefix + name: value for name, value in loop.items()})
        save()
    figures["launches_per_step"] = launch_count.count_step(counted)["total_launches"]
    save()
    table = markdown(result)
    (out / "bench_gpu.md").write_text(table + "\n")
    print(table)
    return result


if __name__ == "__main__":
    main()
