"""Loader throughput per core: the views' crops cut from full JPEGs in the loader
(``contrastkit.data.loading.crops``) against a plain PIL loop.

On synthetic JPEGs (smooth colour fields plus grain, quality 90, so that file sizes are close
to photographs of the same size) written to a temporary folder, in one process with one
thread, reading the same files in the same order, the variants alternate round by round
(the cores are shared: interleaving exposes every variant to the same load):

* ``pil``: the plain loop, per image: ``Image.open``, ``convert("RGB")`` (full decode), one
  random resized crop to 224 (scale (0.2, 1), torchvision's box sampler), ``crop`` then
  ``resize(..., BILINEAR)`` as torchvision does on a PIL image, ``np.asarray``;
* ``loader1``: :class:`~contrastkit.data.loading.crops.LoaderCrops` with one 224 view, its
  items collated into batches of 32 (``collate_images``, as a loader worker does; the PIL
  loop makes no tensor and no batch, which favours it);
* ``loader2``: the same with SCE's two 224 views (each its own box): a training item;
* ``loader1_fast`` / ``loader2_fast``: the same with ``fast_decode=True`` (libjpeg's fast
  inverse DCT; pixels about 1 grey level off; not the default);
* ``square256``: today's device-crop item of the ImageNet configs before this change
  (``ImageFiles`` + ``ResizedSquare(256)``: full decode, float32 resize to a 256 square).

Sets: ``500x375`` (all files 500x375) and ``mixed`` (ImageNet-like sizes, 240x320 to
1600x1200). With ``--store`` the mixed set is also packed into a bounded-side store
(``contrastkit.data.loading.pack``, JPEG quality 90, side <= 320 by default) and read by
``loader2``.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/loader_crops.py [--images 200]
[--rounds 5] [--store]``
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from contrastkit.data.decode.images import collate_images
from contrastkit.data.loading.crops import ATTEMPTS, CropSpec, FileReader, LoaderCrops, crop_box
from contrastkit.data.sources.images.datasets import ImageFiles
from contrastkit.data.sources.wrappers import ResizedSquare

MIXED = ((375, 500), (333, 500), (500, 375), (480, 640), (600, 800), (768, 1024),
         (1200, 1600), (240, 320))  # (height, width)
GPU_RATE = 2500.0  # images/s of a ResNet-50 pretraining step on an H100 (issue 22)


def photo_like(height: int, width: int, rng: np.random.Generator) -> bytes:
    small = (rng.random((height // 24 + 2, width // 24 + 2, 3)) * 255).astype(np.uint8)
    field = np.asarray(Image.fromarray(small).resize((width, height), Image.BICUBIC))
    grain = rng.normal(0, 9, (height, width, 3))
    buf = io.BytesIO()
    Image.fromarray((field + grain).clip(0, 255).astype(np.uint8)).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def write_set(folder: Path, sizes: tuple[tuple[int, int], ...], n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    (folder / "x").mkdir(parents=True)
    paths = []
    for i in range(n):
        path = folder / "x" / f"{i:05d}.jpg"
        path.write_bytes(photo_like(*sizes[i % len(sizes)], rng))
        paths.append(str(path))
    return paths


def pil_loop(paths: list[str]) -> Callable[[], None]:
    spec = CropSpec(224, (0.2, 1.0))
    rng = np.random.default_rng(0)

    def run() -> None:
        for path in paths:
            with Image.open(path) as img:
                rgb = img.convert("RGB")
            x0, y0, w, h = crop_box(rng.random(2 * ATTEMPTS + 2), rgb.height, rgb.width, spec)
            np.asarray(rgb.crop((x0, y0, x0 + w, y0 + h)).resize((224, 224), Image.BILINEAR))
    return run


def loader(paths: list[str], views: int, fast_decode: bool = False,
           batch: int = 32) -> Callable[[], None]:
    dataset = LoaderCrops(FileReader([(p, 0) for p in paths], []),
                          [CropSpec(224, (0.2, 1.0))] * views, seed=0, fast_decode=fast_decode)
    epoch = [0]

    def run() -> None:
        epoch[0] += 1
        for start in range(0, len(dataset), batch):
            collate_images([dataset[(i, epoch[0])]
                            for i in range(start, min(start + batch, len(dataset)))])
    return run


def square256(paths: list[str]) -> Callable[[], None]:
    dataset = ResizedSquare(ImageFiles([(p, 0) for p in paths], [], Path(paths[0]).parent), 256)

    def run() -> None:
        for i in range(len(dataset)):
            dataset[i]
    return run


def measure(variants: dict[str, Callable[[], None]], n: int, rounds: int) -> dict[str, float]:
    """Images per second of CPU time (``time.thread_time``: one core's work, whatever else
    runs on the machine) of each variant, median over ``rounds`` interleaved passes after a
    warm-up pass."""
    for run in variants.values():
        run()
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            start = time.thread_time()
            run()
            times[name].append(time.thread_time() - start)
    return {k: n / statistics.median(v) for k, v in times.items()}


def report(title: str, rates: dict[str, float], disk: int) -> None:
    base = rates["pil"]
    print(f"\n{title} ({disk / 1e6:.1f} MB on disk)")
    print(f"{'variant':<12} {'images/s':>9} {'ms/image':>9} {'x pil':>6} {'cores @2500/s':>14}")
    for name, rate in rates.items():
        print(f"{name:<12} {rate:9.1f} {1e3 / rate:9.2f} {rate / base:6.2f} "
              f"{GPU_RATE / rate:14.1f}")


def folder_bytes(paths: list[str]) -> int:
    return sum(os.path.getsize(p) for p in paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--store", action="store_true", help="also measure a packed store")
    parser.add_argument("--max-side", type=int, default=320)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores, one thread")
    with tempfile.TemporaryDirectory() as tmp:
        for name, sizes in (("500x375", ((375, 500),)), ("mixed", MIXED)):
            paths = write_set(Path(tmp) / name, sizes, args.images, seed=1)
            variants = {"pil": pil_loop(paths), "loader1": loader(paths, 1),
                        "loader2": loader(paths, 2), "loader1_fast": loader(paths, 1, True),
                        "loader2_fast": loader(paths, 2, True), "square256": square256(paths)}
            if args.store and name == "mixed":
                from contrastkit.data.loading.pack import pack_folder

                store = Path(tmp) / "store"
                pack_folder(Path(tmp) / name, store, max_side=args.max_side)
                stored = sorted(str(p) for p in store.rglob("*.jpg"))
                variants["store2"] = loader(stored, 2)
            rates = measure(variants, args.images, args.rounds)
            report(f"{name}: {args.images} JPEGs, {args.rounds} interleaved rounds",
                   rates, folder_bytes(paths))
            if "store2" in rates:
                print(f"store: {folder_bytes(stored) / 1e6:.1f} MB on disk "
                      f"(max side {args.max_side})")
        print(f"load average after {os.getloadavg()}")


if __name__ == "__main__":
    main()
