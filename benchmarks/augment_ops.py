"""Cost of the SCE two-view augmentation as a GPU pays it: dispatched operators, and time.

For the views of the CIFAR recipes (``ViewsSpec(size=32, normalize="cifar10")``: SCE Table 1
*strong* online, *weak* target) on a uint8 batch of 256 32x32 images, prints

* the aten operators dispatched by one call (``torch.profiler``, nested operators included: each
  is a kernel launch or a host-side step on a GPU), per pipeline step (draw / apply) and in total;
* whether any operator that reads a device value back on the host ran (``nonzero``, ``item``...);
* the median wall time of one call on ``--device`` over ``--iters`` calls after warm-up (CUDA
  events around each call on a GPU), also under bf16 autocast.

Targets of the GPU-speed issue: at most 300 operators, at most 2 ms on an H100.

Usage::

    python benchmarks/augment_ops.py                      # CPU: counts and time
    python benchmarks/augment_ops.py --device cuda        # GPU: the same, timed on the device
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from contrastkit.data.augment.views import build_train_views
from contrastkit.data.specs import ViewsSpec
from timing import median_ms

HOST_READS = {"aten::_local_scalar_dense", "aten::item", "aten::nonzero", "aten::is_nonzero",
              "aten::equal", "aten::unique", "aten::_unique2", "aten::masked_select"}


def dispatched(fn: Callable[[], object]) -> list[str]:
    """Names of every aten operator ``fn`` dispatches on the CPU side."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return [e.name for e in prof.events() if e.name.startswith("aten::")]


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    views = build_train_views(ViewsSpec(size=args.size, normalize="cifar10"),
                              ("strong", "weak")).to(device)
    x = torch.randint(0, 256, (args.batch_size, 3, args.size, args.size), dtype=torch.uint8,
                      device=device)
    if device.type == "cuda":
        for pipeline in (views.online, views.target):
            pipeline.generator = torch.Generator(device=device).manual_seed(0)
        views.target.generator = views.online.generator
    for _ in range(3):
        views(x)
    ops = dispatched(lambda: views(x))
    print(f"SCE two views of {args.batch_size}x3x{args.size}x{args.size} uint8 on {device}: "
          f"{len(ops)} aten operators dispatched per call")
    print("  most frequent:", ", ".join(f"{n.removeprefix('aten::')} {c}"
                                        for n, c in Counter(ops).most_common(8)))
    reads = sorted(HOST_READS & set(ops))
    print(f"  operators reading a device value on the host: {reads or 'none'}")
    for name, pipeline in (("online", views.online), ("target", views.target)):
        for step in pipeline.steps:
            def draw(step=step, generator=pipeline.generator) -> None:
                step.sample(args.batch_size, args.size, args.size, device=device,
                            generator=generator)

            print(f"  {name:<7}{type(step).__name__:<24}draw {len(dispatched(draw)):>4}")
    fp32 = median_ms(lambda: views(x), device, args.iters)

    def under_autocast() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            views(x)

    bf16 = median_ms(under_autocast, device, args.iters)
    print(f"median time per call: {fp32:.2f} ms; inside bf16 autocast: {bf16:.2f} ms "
          f"({args.iters} calls, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'}, "
          f"{torch.get_num_threads()} threads)")
    return {"operators": float(len(ops)), "ms": fp32, "ms_autocast": bf16}


if __name__ == "__main__":
    main()
