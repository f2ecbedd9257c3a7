"""DALI's crop-decode of the views' loader crops (``data.crops: dali``) against a plain PIL loop
and the loader-crops path.

CPU (default): images per second of CPU time of the whole process (``time.process_time``: DALI
decodes in its own threads, so the thread's own time would miss them), one torch thread, DALI
with one CPU thread, on the synthetic photo-like JPEGs of ``benchmarks/loader_crops.py`` (the
same files and the same interleaving, median of ``--rounds`` after a warm-up). Variants:

* ``pil``: the plain loop (``Image.open``, ``convert("RGB")``, one random resized crop to 224,
  ``crop`` + ``resize(BILINEAR)``, ``np.asarray``);
* ``loader2``: :class:`~contrastkit.data.loading.crops.LoaderCrops`, SCE's two 224 views,
  collated in batches of 32;
* ``dali1`` / ``dali2``: :class:`~contrastkit.data.loading.dali_crops.DaliCrops` with one / two 224
  views on DALI's CPU backend (libjpeg-turbo region decode, resize), batches of 32.

GPU (``--device gpu``, on a machine with a CUDA GPU): wall-clock images per second of
``DaliCrops`` with two 224 views on DALI's ``mixed`` backend (nvJPEG), batches of
``--batch-size``, ``--threads`` CPU threads (file reads, box draws and Huffman decoding),
against the 2,500 images/s an H100 pretrains ResNet-50 at; the files are written to
``--folder`` (default: a temporary folder) once.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/dali_crops.py [--images 200]
[--rounds 5]``; on a GPU: ``python benchmarks/dali_crops.py --device gpu --images 2048
[--batch-size 256] [--threads 8]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from contrastkit.data.loading.crops import CropSpec, EpochKeys, FileReader
from contrastkit.data.loading.dali_crops import DaliCrops
from loader_crops import GPU_RATE, MIXED, folder_bytes, loader, pil_loop, write_set


def dali(paths: list[str], views: int, device: str = "cpu", batch: int = 32,
         threads: int = 1) -> Callable[[], int]:
    """One epoch of ``DaliCrops`` over ``paths``; returns the images it decoded."""
    keys = EpochKeys(range(len(paths)))
    crops = DaliCrops(FileReader([(p, 0) for p in paths], []), [CropSpec(224, (0.2, 1.0))] *
                      views, keys, batch, seed=0, device=device, num_threads=threads)

    def run() -> int:
        keys.set_epoch(keys.epoch + 1)
        done = 0
        for batch_views, _ in crops:
            done += batch_views[0].shape[0]
        if device == "gpu":
            torch.cuda.synchronize()
        return done
    return run


def measure(variants: dict[str, Callable[[], object]], n: int, rounds: int) -> dict[str, float]:
    """Images per second of process CPU time, median over ``rounds`` interleaved passes after a
    warm-up pass."""
    for run in variants.values():
        run()
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            start = time.process_time()
            run()
            times[name].append(time.process_time() - start)
    return {k: n / statistics.median(v) for k, v in times.items()}


def cpu(args: argparse.Namespace, tmp: Path) -> None:
    for name, sizes in (("500x375", ((375, 500),)), ("mixed", MIXED)):
        paths = write_set(tmp / name, sizes, args.images, seed=1)
        n = args.images - args.images % 32  # DALI drops the last partial batch
        variants = {"pil": pil_loop(paths[:n]), "loader2": loader(paths[:n], 2),
                    "dali1": dali(paths[:n], 1), "dali2": dali(paths[:n], 2)}
        rates = measure(variants, n, args.rounds)
        base = rates["pil"]
        print(f"\n{name} ({folder_bytes(paths) / 1e6:.1f} MB on disk, {n} images)")
        print(f"{'variant':<8} {'images/s':>9} {'ms/image':>9} {'x pil':>6} {'cores @2500/s':>14}")
        for variant, rate in rates.items():
            print(f"{variant:<8} {rate:9.1f} {1e3 / rate:9.2f} {rate / base:6.2f} "
                  f"{GPU_RATE / rate:14.1f}")


def gpu(args: argparse.Namespace, tmp: Path) -> None:
    folder = Path(args.folder) if args.folder else tmp
    paths = sorted(str(p) for p in folder.rglob("*.jpg"))[:args.images]
    if len(paths) < args.images:
        paths = write_set(folder / "mixed", MIXED, args.images, seed=1)
    run = dali(paths, 2, "gpu", args.batch_size, args.threads)
    run()  # warm-up: nvJPEG's buffers, DALI's memory pools
    rates = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        done = run()
        rates.append(done / (time.perf_counter() - start))
    rate = statistics.median(rates)
    print(f"{torch.cuda.get_device_name()}: DALI mixed decode, two 224 views, batch "
          f"{args.batch_size}, {args.threads} CPU threads, {len(paths)} mixed-size JPEGs "
          f"({folder_bytes(paths) / 1e6:.1f} MB): {rate:.0f} images/s "
          f"({rate / GPU_RATE:.2f}x the 2,500 images/s of a ResNet-50 step on an H100)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=256, help="--device gpu")
    parser.add_argument("--threads", type=int, default=8, help="DALI CPU threads (gpu)")
    parser.add_argument("--folder", default=None, help="JPEG folder of --device gpu")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        (cpu if args.device == "cpu" else gpu)(args, Path(tmp))


if __name__ == "__main__":
    main()
