"""Augmentation throughput: SCE two views (strong + weak) batched on device vs per-image Pillow.

Three ways to turn decoded uint8 images into SCE's two views (SCE Table 1 *strong* for the
online branch, *weak* for the target branch, crop scale (0.2, 1.0)):

* ``contrastkit`` -- :func:`contrastkit.data.augment.views.make_views("sce", size)` on a
  collated uint8 batch in the main process (torch threads = 2), the loader only decodes;
* ``kornia`` -- the same pipeline composed of ``kornia.augmentation`` ops
  (:func:`contrastkit.data.augment.kornia_preset`), for reference;
* ``pillow`` -- a per-image implementation of the same pipeline written with
  ``PIL.ImageEnhance`` / ``ImageFilter`` / ``ImageOps`` as a torchvision-style loader does,
  run in a ``torch.utils.data.DataLoader`` with 2 worker processes (to-tensor and collate
  included, since a loader must do them).

Run: ``python benchmarks/data_views.py [--iters N] [--sizes 32 224]``. Prints images/s (one image
= its two views).

``--ops``: per-op micro-benchmark instead (one torch thread, 64x3x224x224 and 256x3x32x32, all
samples selected): each plain-torch op of contrastkit (or the formula it replaced) against
kornia's functional op of the same semantics, timed in alternation in the same run (process CPU
time, which a busy shared CPU disturbs far less than the wall clock); prints the best time of
each and the median of the per-pair ratios kornia / torch. These figures decide
which pixel ops :mod:`contrastkit.data.augment` takes from kornia (threshold: 1.25x).
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from contrastkit.data.augment import _color as color
from contrastkit.data.augment import _geometry as geometry
from contrastkit.data.augment import kornia_preset
from contrastkit.data.augment.views import make_views

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


# ---------------------------------------------------------------- per op: torch vs kornia
def _former_gray(x: torch.Tensor) -> torch.Tensor:
    r, g, b = x.unbind(1)
    return (0.299 * r + 0.587 * g + 0.114 * b).unsqueeze(1)


def _former_blur(x: torch.Tensor, sigma: torch.Tensor, k: int) -> torch.Tensor:
    """Grouped separable conv2d with float64 kernels, reflect padding."""
    n, ch, height, width = x.shape
    pos = torch.arange(k, dtype=torch.float64) - (k - 1) / 2
    ker = torch.exp(-0.5 * (pos[None, :] / sigma[:, None]) ** 2)
    ker = (ker / ker.sum(dim=1, keepdim=True)).to(x.dtype).repeat_interleave(ch, dim=0)
    flat, p, grp = x.reshape(1, n * ch, height, width), k // 2, n * ch
    flat = F.conv2d(F.pad(flat, (p, p, 0, 0), mode="reflect"), ker[:, None, None, :], groups=grp)
    flat = F.conv2d(F.pad(flat, (0, 0, p, p), mode="reflect"), ker[:, None, :, None], groups=grp)
    return flat.view(n, ch, height, width)


def _former_crop_pad_flip(x: torch.Tensor, prm: dict, size: int, pad: int) -> torch.Tensor:
    """Zero padding + one advanced-indexing gather."""
    padded = F.pad(x, (pad, pad, pad, pad))
    offsets, flip = prm["offsets"], prm["flip"]
    ar = torch.arange(size)
    cols = offsets[:, :1] + ar[None, :]
    cols = torch.where(flip[:, None], cols.flip(1), cols)
    rows = offsets[:, 1:] + ar[None, :]
    b = torch.arange(x.shape[0])[:, None, None]
    out = padded[b, :, rows[:, :, None], cols[:, None, :]]
    return out.permute(0, 3, 1, 2).contiguous()


def _warp_boxes(x: torch.Tensor, boxes: torch.Tensor, flip: torch.Tensor, size: int):
    """resample_boxes through kornia's warp_affine (half-pixel map, border padding)."""
    from kornia.geometry.transform import warp_affine

    x0, y0, w, h = boxes.unbind(1)
    sx, sy = size / w, size / h
    tx = (0.5 - x0) * sx - 0.5
    m = torch.zeros(x.shape[0], 2, 3, dtype=torch.float64)
    m[:, 0, 0] = torch.where(flip, -sx, sx)
    m[:, 0, 2] = torch.where(flip, size - 1 - tx, tx)
    m[:, 1, 1] = sy
    m[:, 1, 2] = (0.5 - y0) * sy - 0.5
    return warp_affine(x, m.to(x.dtype), (size, size), padding_mode="border", align_corners=False)


def _op_cases(batch: int, size: int) -> list[tuple[str, Callable, Callable]]:
    """(name, torch op, kornia op) on one random batch."""
    import kornia

    ke, kg = kornia.enhance, kornia.geometry.transform
    g = torch.Generator().manual_seed(0)
    x = torch.rand(batch, 3, size, size, generator=g)
    f = 0.6 + 0.8 * torch.rand(batch, generator=g, dtype=torch.float64)
    shift = 0.2 * torch.rand(batch, generator=g, dtype=torch.float64) - 0.1
    sigma = 0.1 + 1.9 * torch.rand(batch, generator=g, dtype=torch.float64)
    k = max(3, int(0.1 * size) | 1)
    boxes = geometry.sample_crop_boxes(batch, size, size, (0.2, 1.0), (3 / 4, 4 / 3), g)
    flip = torch.rand(batch, generator=g) < 0.5
    pcf = geometry.RandomCropPadFlip(size, 4, generator=g)
    prm = pcf.sample(batch, size, size)
    big = torch.rand(batch, 3, size + 32, size + 32, generator=g)
    return [
        ("rgb_to_grayscale", lambda: _former_gray(x), lambda: kornia.color.rgb_to_grayscale(x)),
        ("gaussian_blur2d", lambda: _former_blur(x, sigma, k),
         lambda: kornia.filters.gaussian_blur2d(x, k, sigma.float()[:, None].repeat(1, 2))),
        ("blur (banded matmul)", lambda: _former_blur(x, sigma, k),
         lambda: color.blur(x, sigma, k)),
        ("solarize", lambda: torch.where(x >= 0.5, 1.0 - x, x), lambda: ke.solarize(x, 0.5)),
        ("warp_affine (pad-crop-flip)", lambda: _former_crop_pad_flip(x, prm, size, 4),
         lambda: pcf.apply(x, prm)),
        ("brightness_accumulative", lambda: color.adjust_brightness(x, f),
         lambda: ke.adjust_brightness_accumulative(x, f)),
        ("contrast_with_mean_sub", lambda: color.adjust_contrast(x, f),
         lambda: ke.adjust_contrast_with_mean_subtraction(x, f)),
        ("saturation_with_gray_sub", lambda: color.adjust_saturation(x, f),
         lambda: ke.adjust_saturation_with_gray_subtraction(x, f)),
        ("adjust_hue", lambda: color.adjust_hue(x, shift),
         lambda: ke.adjust_hue(x, shift * (2 * math.pi))),
        ("warp_affine (crop-resize)", lambda: geometry.resample_boxes(x, boxes, size, flip),
         lambda: _warp_boxes(x, boxes, flip, size)),
        ("center_crop", lambda: geometry.center_crop(big, size).contiguous(),
         lambda: kg.center_crop(big, (size, size))),
    ]


def bench_ops(shapes: tuple[tuple[int, int], ...] = ((64, 224), (256, 32)), pairs: int = 8):
    """Best ms of the torch and kornia op, and the median per-pair ratio kornia / torch."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    results: dict[tuple[int, int, str], tuple[float, float, float]] = {}
    try:
        print("per op, 1 thread, CPU ms (best of alternated pairs); ratio: median kornia/torch")
        for batch, size in shapes:
            print(f"--- {batch}x3x{size}x{size}")
            for name, ours, theirs in _op_cases(batch, size):
                ours(), theirs()
                t_ours, t_kornia, ratios = [], [], []
                for i in range(pairs):  # alternate which op runs first
                    pair = []
                    for fn in ((ours, theirs) if i % 2 == 0 else (theirs, ours)):
                        start = time.process_time()  # CPU time: robust to a shared, busy CPU
                        fn()
                        pair.append(time.process_time() - start)
                    a, b = pair if i % 2 == 0 else pair[::-1]
                    t_ours.append(a)
                    t_kornia.append(b)
                    ratios.append(b / a)
                row = (1e3 * min(t_ours), 1e3 * min(t_kornia), float(np.median(ratios)))
                results[(batch, size, name)] = row
                print(f"{name:<28} torch {row[0]:9.2f}  kornia {row[1]:9.2f}  ratio {row[2]:5.2f}")
    finally:
        torch.set_num_threads(old)
    return results


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; ``argv=None`` uses the defaults (does not read ``sys.argv``).

    Returns ``{size: {column: images/s}}``, or with ``--ops`` :func:`bench_ops`'s results.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 224])
    parser.add_argument("--ops", action="store_true", help="per-op torch vs kornia instead")
    args = parser.parse_args([] if argv is None else argv)
    if args.ops:
        return bench_ops(pairs=max(2, args.iters))
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
