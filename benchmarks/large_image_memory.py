"""Peak memory of reading one very large image (10000 x 10000 by default) from an image folder.

Writes one JPEG and one PNG of that size (smooth colour fields plus grain) to a temporary
folder (or reuses them, ``--folder``), then, for each case, starts a fresh Python process that
imports contrastkit, records its peak resident memory (``VmHWM`` of ``/proc/self/status``:
Pillow's buffers are outside ``tracemalloc``'s view, and ``getrusage``'s ``ru_maxrss`` of a
child starts from its parent's peak at the fork), reads the image once and prints the growth
of that peak:

* ``square``: ``registry.open_split("folder", ..., load_size=64)[0][0]`` (an image folder
  read with ``data.load_size``: ``ImageFiles`` under ``ResizedSquare``);
* ``crops``: ``LoaderCrops`` with two 64-pixel views (``data.crops: loader``);
* ``check``: ``ImageFiles(..., skip_corrupt=True)`` (the up-front readability check);
* ``finetune``: ``ResizedSquare(FileListImages(...), 64)[0]`` (a file list of ``eval finetune``;
  ``eval voc07``'s ``VOC07Images`` reads its files the same way);
* ``pack``: ``encode_bounded`` of the file with ``--max-side 1024`` (``data pack``).

Usage: ``PYTHONPATH=src .venv/bin/python benchmarks/large_image_memory.py [--side 10000]
[--folder DIR]`` (Linux only)
(run it with another ``PYTHONPATH`` to measure another version of the code).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

CASES = ("square", "crops", "check", "finetune", "pack")

CHILD = r"""
import sys, warnings
from pathlib import Path
import torch
from contrastkit.data.sources import registry
from contrastkit.data.sources.images.datasets import ImageFiles
from contrastkit.data.loading.crops import CropSpec, FileReader, LoaderCrops
case, path = sys.argv[1], Path(sys.argv[2])
torch.zeros(1) + 1
def peak():
    status = Path("/proc/self/status").read_text().split("VmHWM:")[1]
    return int(status.split()[0])
before = peak()
if case == "square":
    dataset, _ = registry.open_split("folder", str(path.parent.parent), "train", load_size=64)
    shape = tuple(dataset[0][0].shape)
elif case == "crops":
    crops = LoaderCrops(FileReader([(str(path), 0)], ["x"]), [CropSpec(64, (0.2, 1.0))] * 2)
    shape = tuple(crops[0][0][0].shape)
elif case == "finetune":
    from contrastkit.data.sources.transfer_sets import FileList, FileListImages
    from contrastkit.data.sources.wrappers import ResizedSquare
    files = FileListImages(FileList([path], [0], ["x"]))
    shape = tuple(ResizedSquare(files, 64)[0][0].shape)
elif case == "pack":
    from contrastkit.data.loading.pack import encode_bounded
    data, ext = encode_bounded(str(path), str(path), 1024, 90)
    shape = (len(data), ext)
else:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shape = (len(ImageFiles([(str(path), 0)], ["x"], path.parent, skip_corrupt=True)),)
after = peak()
print(f"{(after - before) / 1024:.0f} {shape}")
"""


def write_images(folder: Path, side: int) -> dict[str, Path]:
    """A JPEG and a PNG of ``side`` x ``side`` under ``folder/train/x/`` (kept if there)."""
    out = folder / "train" / "x"
    paths = {"jpeg": out / "big.jpg", "png": out / "big.png"}
    if all(p.is_file() and Image.open(p).size == (side, side) for p in paths.values()):
        return paths
    rng = np.random.default_rng(0)
    small = (rng.random((side // 64 + 2, side // 64 + 2, 3)) * 255).astype(np.uint8)
    field = np.asarray(Image.fromarray(small).resize((side, side), Image.BILINEAR))
    grain = rng.integers(-6, 7, (side, side, 1), dtype=np.int16)
    pixels = Image.fromarray((field + grain).clip(0, 255).astype(np.uint8))
    out.mkdir(parents=True, exist_ok=True)
    pixels.save(paths["jpeg"], quality=90)
    pixels.save(paths["png"], compress_level=1)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", type=int, default=10000)
    parser.add_argument("--folder", default=None, help="where the images are kept (default: "
                        "a temporary folder)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_images(Path(args.folder or tmp), args.side)
        for kind, path in paths.items():
            other = next(p for k, p in paths.items() if k != kind)
            for case in CASES:
                hidden = other.rename(other.with_suffix(".hidden"))  # one image in the folder
                try:
                    run = subprocess.run([sys.executable, "-c", CHILD, case, str(path)],
                                         capture_output=True, text=True, check=True)
                finally:
                    hidden.rename(other)
                peak, shape = run.stdout.split(" ", 1)
                rows.append({"format": kind, "case": case, "peak_growth_mib": int(peak),
                             "file_mib": round(path.stat().st_size / 2**20, 1),
                             "result": shape.strip()})
                print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
