"""Augmentation throughput: SCE two views (strong + weak) batched on device vs per-image Pillow.

Three ways to turn decoded uint8 images into SCE's two views (SCE Table 1 *strong* for the
online branch, *weak* for the target branch, crop scale (0.2, 1.0)):

* ``contrastkit`` -- :func:`contrastkit.data.views.make_views("sce", size)` on a collated uint8
  batch in the main process (torch threads = 2), the loader only decodes;
* ``kornia`` -- the same pipeline composed of ``kornia.augmentation`` ops
  (:func:`contrastkit.data.augment.kornia_preset`), for reference;
* ``pillow`` -- a per-image implementation of the same pipeline written with
  ``PIL.ImageEnhance`` / ``ImageFilter`` / ``ImageOps`` as a torchvision-style loader does,
  run in a ``torch.utils.data.DataLoader`` with 2 worker processes (to-tensor and collate
  included, since a loader must do them).

Run: ``python benchmarks/data_views.py [--iters N] [--sizes 32 224]``. Prints images/s (one image
= its two views).
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Callable

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from contrastkit.data.augment import kornia_preset
from contrastkit.data.views import make_views

BATCH = {32: 256, 224: 64}


# ---------------------------------------------------------------- per-image Pillow reference
def _pil():
    from PIL import Image, ImageEnhance, ImageFilter, ImageOps

    return Image, ImageEnhance, ImageFilter, ImageOps


def _crop_box(rng: random.Random, width: int, height: int, scale: tuple[float, float]) -> tuple:
    for _ in range(10):
        area = width * height * rng.uniform(*scale)
        ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        w, h = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
        if 0 < w <= width and 0 < h <= height:
            x0, y0 = rng.randint(0, width - w), rng.randint(0, height - h)
            return (x0, y0, x0 + w, y0 + h)
    return (0, 0, width, height)


def _hue(img, shift: float):
    Image = _pil()[0]
    hsv = np.array(img.convert("HSV"))
    hsv[..., 0] = (hsv[..., 0].astype(np.int16) + round(shift * 255)) % 256
    return Image.fromarray(hsv, "HSV").convert("RGB")


def pillow_view(img, size: int, rng: random.Random, strong: bool):
    """One view of one PIL image: crop (0.2, 1) + flip [+ jitter 0.8, gray 0.2, blur 0.5]."""
    Image, ImageEnhance, ImageFilter, ImageOps = _pil()
    img = img.resize((size, size), Image.BILINEAR, box=_crop_box(rng, *img.size, (0.2, 1.0)))
    if rng.random() < 0.5:
        img = ImageOps.mirror(img)
    if strong:
        if rng.random() < 0.8:
            order = [0, 1, 2, 3]
            rng.shuffle(order)
            for o in order:
                if o == 0:
                    img = ImageEnhance.Brightness(img).enhance(rng.uniform(0.6, 1.4))
                elif o == 1:
                    img = ImageEnhance.Contrast(img).enhance(rng.uniform(0.6, 1.4))
                elif o == 2:
                    img = ImageEnhance.Color(img).enhance(rng.uniform(0.6, 1.4))
                else:
                    img = _hue(img, rng.uniform(-0.1, 0.1))
        if rng.random() < 0.2:
            img = img.convert("L").convert("RGB")
        if rng.random() < 0.5:
            img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.1, 2.0)))
    return torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1).float().div_(255.0)


class PillowTwoViews(Dataset):
    """Decoded uint8 HWC images -> (strong view, weak view), one image at a time."""

    def __init__(self, images: np.ndarray, size: int) -> None:
        self.images, self.size = images, size
        self.rng = random.Random(0)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        img = _pil()[0].fromarray(self.images[i])
        return (pillow_view(img, self.size, self.rng, True),
                pillow_view(img, self.size, self.rng, False))


def _reseed(worker_id: int) -> None:
    info = torch.utils.data.get_worker_info()
    info.dataset.rng = random.Random(worker_id)


# ---------------------------------------------------------------- timing
def _images(n: int, size: int) -> np.ndarray:
    """Smooth random colour images (n, size, size, 3) uint8."""
    g = torch.Generator().manual_seed(0)
    low = torch.rand(n, 3, 8, 8, generator=g)
    up = torch.nn.functional.interpolate(low, size=(size, size), mode="bilinear")
    return (up * 255).round().to(torch.uint8).permute(0, 2, 3, 1).contiguous().numpy()


def _best(fn: Callable[[], int], iters: int) -> float:
    """Best images/s over ``iters`` timed calls (after one warm-up call)."""
    fn()
    best = 0.0
    for _ in range(iters):
        start = time.perf_counter()
        n = fn()
        best = max(best, n / (time.perf_counter() - start))
    return best


def _threads(n: int, fn: Callable[[], int]) -> Callable[[], int]:
    def run() -> int:
        old = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            return fn()
        finally:
            torch.set_num_threads(old)

    return run


def bench_size(size: int, iters: int) -> dict[str, float]:
    batch = BATCH.get(size, 64)
    images = _images(batch * 4, size)
    x = torch.from_numpy(images[:batch]).permute(0, 3, 1, 2).contiguous()
    views = make_views("sce", size)
    strong, weak = kornia_preset("strong", size), kornia_preset("weak", size)

    def ours() -> int:
        with torch.no_grad():
            views(x)
        return batch

    def kornia_views() -> int:
        with torch.no_grad():
            xf = x.float() / 255
            strong(xf), weak(xf)
        return batch

    def pillow(workers: int) -> Callable[[], int]:
        extra = {"persistent_workers": True, "worker_init_fn": _reseed} if workers else {}
        loader = DataLoader(PillowTwoViews(images, size), batch_size=batch, num_workers=workers,
                            **extra)

        def run() -> int:
            n = 0
            for a, _ in loader:  # one pass = 4 batches
                n += a.shape[0]
            return n

        return run

    return {
        "contrastkit_1": _best(_threads(1, ours), iters),
        "contrastkit_2": _best(_threads(2, ours), iters),
        "kornia_2": _best(_threads(2, kornia_views), max(1, iters // 2)),
        "pillow_0": _best(_threads(1, pillow(0)), max(1, iters // 2)),
        "pillow_2": _best(pillow(2), iters),
    }


def main(argv: list[str] | None = None) -> dict[int, dict[str, float]]:
    """Run the benchmark; ``argv=None`` uses the defaults (does not read ``sys.argv``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 224])
    args = parser.parse_args([] if argv is None else argv)
    torch.set_num_threads(2)
    print("SCE two views (strong + weak) on CPU, images/s (higher is better); _1/_2: threads,")
    print("pillow_0: per-image in the main process, pillow_2: DataLoader with 2 worker processes")
    cols = ("contrastkit_1", "contrastkit_2", "kornia_2", "pillow_0", "pillow_2")
    print(f"{'size':>5} {'batch':>6} " + " ".join(f"{c:>13}" for c in cols))
    results = {}
    for size in args.sizes:
        r = bench_size(size, args.iters)
        results[size] = r
        print(f"{size:>5} {BATCH.get(size, 64):>6} " + " ".join(f"{r[c]:>13,.0f}" for c in cols))
    return results


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
