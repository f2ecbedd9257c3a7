"""Data pipeline throughput: JPEG folder -> array cache, and epochs over the cache.

Measures, on the shared CIFAR-10 JPEG archive (60,000 32x32 files):

(a) decoding the extracted folder into the array cache (``ArrayCache.build_or_load``), train
    (50,000) and test (10,000) folders, with the 2-process pool and with 1 process; and reading
    the ``.tar.gz`` directly (no extraction). Extraction itself is not timed.
(b) one shuffled epoch over the 50,000-image cache in batches of 256: ``CachedImages.batches``
    and ``torch.utils.data.DataLoader`` (which uses ``__getitems__``), plus reopening the valid
    cache (sidecar + SHA-256 check).

Then runs ``benchmarks/data_views.py``'s ``main()`` (augmentation throughput) if present.

Usage: ``.venv/bin/python benchmarks/data.py [--archive PATH] [--repeats N]``
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import torch

from contrastkit.data.sources.images.cache import ArrayCache

SHARED_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
DEFAULT_ARCHIVE = SHARED_DATA / "cifar10-jpg.tar.gz"


def _decode(
    sources: list[tuple[object, str | None]], cache_dir: Path, workers: int
) -> tuple[float, int]:
    shutil.rmtree(cache_dir, ignore_errors=True)
    n = 0
    start = time.perf_counter()
    for source, subdir in sources:
        ds = ArrayCache.build_or_load(source, cache_dir, subdir=subdir, workers=workers)
        assert ds.built
        n += len(ds)
    return time.perf_counter() - start, n


def _best(fn, repeats: int) -> tuple[float, int]:
    runs = [fn() for _ in range(repeats)]
    return min(runs, key=lambda r: r[0])


def bench_decode(archive: Path, work: Path, repeats: int) -> Path:
    """Part (a); returns the folder of the 50,000-image train cache."""
    t0 = time.perf_counter()
    (work / "jpg").mkdir()
    if shutil.which("tar"):
        subprocess.run(["tar", "xzf", str(archive), "-C", str(work / "jpg")], check=True)
    else:
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(work / "jpg", filter="data")
    print(f"extracted {archive.name} in {time.perf_counter() - t0:.1f} s (not timed below)")
    folders = [(work / "jpg" / "train", None), (work / "jpg" / "test", None)]
    print("(a) decode 60,000 CIFAR-10 JPEGs into the array cache (best of "
          f"{repeats}, cold cache each run)")
    for label, sources, workers in [
        ("folder, 2 processes", folders, 2),
        ("folder, 1 process", folders, 1),
        ("tar.gz directly, 2 processes", [(archive, "train"), (archive, "test")], 2),
    ]:
        seconds, n = _best(lambda s=sources, w=workers: _decode(s, work / "cache", w), repeats)
        print(f"    {label:30s} {n:6d} images  {seconds:6.2f} s  {n / seconds:9,.0f} images/s")
    shutil.rmtree(work / "cache", ignore_errors=True)
    ArrayCache.build_or_load(work / "jpg" / "train", work / "cache")
    return work / "jpg" / "train"


def bench_epoch(train_folder: Path, cache_dir: Path, repeats: int) -> None:
    """Part (b): a full shuffled epoch, batch 256, over the cache."""
    t0 = time.perf_counter()
    ds = ArrayCache.build_or_load(train_folder, cache_dir)
    assert not ds.built
    print(f"(b) reopen the valid cache (scan + stat 50,000 files, SHA-256 of "
          f"{ds.images.nbytes / 1e6:.0f} MB): {time.perf_counter() - t0:.2f} s")
    g = torch.Generator().manual_seed(0)

    def batches() -> tuple[float, int]:
        start, n = time.perf_counter(), 0
        for images, _ in ds.batches(256, shuffle=True, generator=g):
            n += len(images)
        return time.perf_counter() - start, n

    def loader() -> tuple[float, int]:
        dl = torch.utils.data.DataLoader(ds, batch_size=256, shuffle=True, num_workers=0)
        start, n = time.perf_counter(), 0
        for images, _ in dl:
            n += len(images)
        return time.perf_counter() - start, n

    def batch_sampler() -> tuple[float, int]:
        sampler = torch.utils.data.BatchSampler(
            torch.utils.data.RandomSampler(ds, generator=g), 256, drop_last=False
        )
        dl = torch.utils.data.DataLoader(ds, sampler=sampler, batch_size=None)
        start, n = time.perf_counter(), 0
        for images, _ in dl:
            n += len(images)
        return time.perf_counter() - start, n

    for label, fn in [("CachedImages.batches(256, shuffle)", batches),
                      ("DataLoader(bs=256, shuffle, 0 workers)", loader),
                      ("DataLoader(BatchSampler 256, ds[idx])", batch_sampler)]:
        seconds, n = _best(fn, repeats)
        print(f"    {label:40s} {n:6d} images  {seconds:6.3f} s  {n / seconds:11,.0f} images/s")


def run_views() -> None:
    path = Path(__file__).with_name("data_views.py")
    if not path.is_file():
        print("benchmarks/data_views.py not present: augmentation throughput skipped")
        return
    spec = importlib.util.spec_from_file_location("data_views", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main([])  # its own defaults, not this script's command line


def main(argv: list[str] | None = None) -> None:
    """Run parts (a) and (b), then the augmentation benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path, default=DEFAULT_ARCHIVE)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-views", action="store_true", help="do not run data_views.py")
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # progress visible when piped to a log
    torch.set_num_threads(2)
    if args.archive.is_file():
        with tempfile.TemporaryDirectory(prefix="ck-bench-data-") as tmp:
            train = bench_decode(args.archive, Path(tmp), args.repeats)
            bench_epoch(train, Path(tmp) / "cache", args.repeats)
    else:
        print(f"{args.archive} not found: cache benchmarks skipped")
    if not args.skip_views:
        run_views()


if __name__ == "__main__":
    main()
