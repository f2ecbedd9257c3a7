"""Video model throughput on the CPU: decoded clips/s and R3D-18 forward+backward clips/s.

1. Decoding: :func:`benchmarks.video_decode.main` (PyAV, ``DataLoader`` with 2 workers,
   8x112x112 clips of 2.56 s; see ``benchmarks/README.md``, "Video decoding").
2. Model: one SGD step (forward + backward + update) of ResNet3D-18 (SCE Table 23, width 64,
   20,023,872 parameters) with a 512 -> 1 linear head and cross-entropy on a random float batch
   ``(B, 3, 8, 112, 112)``, after warm-up steps; median and range over the timed steps. The
   same for the pretraining views' cost on the same batch (strong-alpha with shared frame
   parameters, :class:`contrastkit.data.augment.views.ClipView`), reported apart.

Run: ``.venv/bin/python benchmarks/video.py [--batch-size 4] [--steps 5] [--threads 1]
[--skip-decode]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F


def time_model(batch: int, steps: int, warmup: int, frames: int, size: int) -> dict[str, float]:
    """Median / min / max seconds per R3D-18 training step and clips/s."""
    from contrastkit.models.resnet3d import resnet3d_18

    torch.manual_seed(0)
    backbone = resnet3d_18()
    head = torch.nn.Linear(backbone.out_dim, 1)
    params = list(backbone.parameters()) + list(head.parameters())
    optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, frames, size, size)
    y = torch.zeros(batch, 1)
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        loss = F.mse_loss(head(backbone(x)), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    return {"step_s_median": median, "step_s_min": min(times), "step_s_max": max(times),
            "clips_per_s": batch / median}


def time_views(batch: int, steps: int, frames: int, size: int) -> float:
    """Median seconds to make one strong-alpha view of a uint8 clip batch (shared frames)."""
    from contrastkit.data.augment.views import ClipView

    view = ClipView("strong_alpha", size, rgb_difference_p=0.2, jitter_strength=1.0)
    clips = torch.randint(0, 256, (batch, frames, 3, 128, 171), dtype=torch.uint8)
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        view(clips)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--size", type=int, default=112)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip-decode", action="store_true")
    args = parser.parse_args(argv)
    result: dict[str, object] = {}
    if not args.skip_decode:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from video_decode import main as decode_main

        result["decode"] = decode_main(["--workers", "2"])
    torch.set_num_threads(args.threads)
    model = time_model(args.batch_size, args.steps, args.warmup, args.frames, args.size)
    result["r3d18"] = model
    print(f"R3D-18 fwd+bwd+SGD, batch {args.batch_size} x {args.frames}x{args.size}x{args.size}, "
          f"{args.threads} thread(s): median {model['step_s_median']:.2f} s/step "
          f"(min {model['step_s_min']:.2f}, max {model['step_s_max']:.2f}) -> "
          f"{model['clips_per_s']:.2f} clips/s")
    views = time_views(args.batch_size, 3, args.frames, args.size)
    result["view_s"] = views
    print(f"strong-alpha clip view (128x171 -> {args.size}), batch {args.batch_size}: "
          f"{views:.3f} s")
    return result


if __name__ == "__main__":
    main()
