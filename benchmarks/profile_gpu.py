"""Where the time of `make bench-gpu`'s figures goes: torch.profiler tables per part.

For the three parts that ``bench_gpu.py`` times (the two-view augmentation of a 256-image
batch, the SCE loss forward + backward at N 256, K 4,096, D 128 under bf16 autocast, and the
SCE model step of ``configs/repro/gpu/table6_sce.yaml``: ResNet-18, shuffle BN 8, bf16,
channels_last) this reports, per iteration:

* wall milliseconds (host clock, device synchronised around the timed iterations);
* device-busy milliseconds (the sum of the kernels' own times) and busy / wall: a part whose
  device is busy well under its wall time is bound by the host (Python, launches), not by the
  kernels;
* kernels launched;
* the operators with the most device time (CPU time on a CPU).

Usage: ``python benchmarks/profile_gpu.py --out folder [--iters 20]``. On a CPU it runs at a
small size (batch 32, width 8) and says so.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import train_step
from contrastkit.data.augment.views import build_train_views
from contrastkit.data.specs import ViewsSpec
from contrastkit.hot_path import hot_path
from contrastkit.losses import sce
from contrastkit.models.factory import BackboneSpec


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def profile_part(name: str, fn: Callable[[], object], device: torch.device, iters: int,
                 top: int = 12) -> str:
    """Markdown section for ``fn``: wall and device-busy ms per iteration, kernels, top ops."""
    for _ in range(3):
        fn()
    _sync(device)
    begin = time.perf_counter()
    for _ in range(iters):
        fn()
    _sync(device)
    wall_ms = 1e3 * (time.perf_counter() - begin) / iters
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(iters):
            fn()
        _sync(device)
    events = prof.key_averages()
    lines = [f"## {name}", ""]
    if cuda:
        kernels = [e for e in events if e.device_type == DeviceType.CUDA]
        busy_ms = sum(e.self_device_time_total for e in kernels) / 1e3 / iters
        launched = sum(e.count for e in kernels) / iters
        lines += [f"wall {wall_ms:.3f} ms per iteration; device busy {busy_ms:.3f} ms "
                  f"({busy_ms / wall_ms:.0%} of wall); {launched:.0f} kernels per iteration", "",
                  "```", events.table(sort_by="self_device_time_total", row_limit=top,
                                      max_name_column_width=60), "```", ""]
    else:
        lines += [f"wall {wall_ms:.3f} ms per iteration", "", "```",
                  events.table(sort_by="self_cpu_time_total", row_limit=top,
                               max_name_column_width=60), "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench-gpu", help="folder for profile_gpu.md")
    parser.add_argument("--iters", type=int, default=20)
    opts = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    batch = 256 if cuda else 32
    torch.manual_seed(0)

    views = build_train_views(ViewsSpec(size=32, normalize="cifar10"), ("strong", "weak"))
    views = views.to(device)
    images = torch.randint(0, 256, (batch, 3, 32, 32), dtype=torch.uint8, device=device)

    def augment() -> None:
        with torch.no_grad():
            views(images)

    query = torch.randn(batch, 128, device=device, requires_grad=True)
    key, queue = torch.randn(batch, 128, device=device), torch.randn(4096, 128, device=device)

    def loss_step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16), hot_path():
            value = sce(query, key, queue, temperature=0.2, target_temperature=0.1)
        value.backward()

    train_step.DEVICE = device
    if not cuda:
        train_step.BACKBONE = BackboneSpec(name="resnet18", cifar_stem=True, width=8)
    with torch.no_grad():
        made = views(images)
    if cuda:
        made = [v.contiguous(memory_format=torch.channels_last) for v in made]
    labels = torch.randint(0, 10, (batch,), device=device)
    runner = train_step.MethodStep(train_step.table6_sce(), made, labels, total_steps=10**6,
                                   device=device)

    def model_step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            runner.step()

    where = torch.cuda.get_device_name(0) if cuda else "a CPU (small size: batch 32, width 8)"
    parts = [f"# profile_gpu on {where}, torch {torch.__version__}, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", ""]
    for name, fn in (("augmentation (two views)", augment), ("SCE loss fwd+bwd", loss_step),
                     ("SCE model step", model_step)):
        parts.append(profile_part(name, fn, device, opts.iters))
    if cuda:
        parts.append(f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    text = "\n".join(parts)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "profile_gpu.md").write_text(text + "\n")
    print(text)
    return text


if __name__ == "__main__":
    main()
