"""A user's own image folder, as the tests need it: class sub-folders (or none), images of
several sizes, and files that are not images."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

CLASSES = ("apple", "bear", "car", "dog")
SIZES = ((20, 24), (16, 16), (24, 18))  # (height, width), cycled through


def make_own_folder(root: Path, per_class: int = 12, classes: tuple[str, ...] = CLASSES,
                    sizes: tuple[tuple[int, int], ...] = SIZES, corrupt: int = 0,
                    labelled: bool = True, seed: int = 0) -> Path:
    """Write ``per_class`` PNGs per class (a class colour plus noise, sizes cycling through
    ``sizes``) under ``root/<class>/`` (``labelled``) or directly under ``root``, then
    ``corrupt`` files with an image name but no image inside (one per class, in turn)."""
    rng = np.random.default_rng(seed)
    for c, name in enumerate(classes):
        folder = root / name if labelled else root
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            h, w = sizes[i % len(sizes)]
            pixels = rng.integers(0, 120, size=(h, w, 3))
            pixels[..., c % 3] += 100 + 30 * (c // 3)
            Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(folder / f"{name}_{i}.png")
    for j in range(corrupt):
        name = classes[j % len(classes)]
        folder = root / name if labelled else root
        (folder / f"{name}_broken{j}.jpg").write_bytes(b"\xff\xd8 this is not a JPEG")
    return root
