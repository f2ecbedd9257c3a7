"""STL-10 reader for the official binary files (Coates, Ng & Lee, 2011).

On-disk format (``stl10_binary/``): ``*_X.bin`` are raw uint8 images of 3x96x96 bytes each,
every image stored in column-major (Fortran) order of ``(H, W, C)``: byte ``h + 96 w + 96*96 c``
holds pixel ``(c, h, w)``. Read as a C-order ``(N, 3, 96, 96)`` array this gives ``(c, w, h)``,
so the last two axes are swapped. ``*_y.bin`` hold one uint8 label per image in 1..10 (mapped
to 0..9 here); ``class_names.txt`` lists the 10 names. The 100,000 unlabelled images (2.7 GB)
are memory-mapped, never loaded whole.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._common import UNLABELLED, ArrayImages, check_split, files_fingerprint
from ._download import download as _download
from ._download import download_command, extract_tar

_FOLDER = "stl10_binary"
_ARCHIVE = "stl10_binary.tar.gz"
_URL = "http://ai.stanford.edu/~acoates/stl10/stl10_binary.tar.gz"
_MD5 = "91f7769df0f17e558f3565bffb0c7dfb"
_IMAGE_BYTES = 3 * 96 * 96
_DEFAULT_CLASSES = [
    "airplane", "bird", "car", "cat", "deer", "dog", "horse", "monkey", "ship", "truck",
]  # fmt: skip


def _memmap_images(path: Path) -> np.ndarray:
    if not path.is_file():
        raise FileNotFoundError(f"missing STL-10 file {path}")
    size = path.stat().st_size
    if size == 0 or size % _IMAGE_BYTES:
        raise ValueError(
            f"{path}: size {size} bytes is not a positive multiple of {_IMAGE_BYTES} "
            "(3x96x96 uint8 images); truncated or not an STL-10 image file"
        )
    raw = np.memmap(path, dtype=np.uint8, mode="r", shape=(size // _IMAGE_BYTES, 3, 96, 96))
    return raw.transpose(0, 1, 3, 2)  # (N, C, W, H) on disk -> (N, C, H, W), lazily


def _read_labels(path: Path, n: int) -> np.ndarray:
    if not path.is_file():
        raise FileNotFoundError(f"missing STL-10 file {path}")
    labels = np.fromfile(path, dtype=np.uint8).astype(np.int64)
    if len(labels) != n:
        raise ValueError(f"{path}: {len(labels)} labels, expected {n} (one byte per image)")
    if len(labels) and (labels.min() < 1 or labels.max() > 10):
        raise ValueError(f"{path}: labels must be in 1..10")
    return labels - 1


class _Stacked:
    """Concatenation of image arrays along axis 0, indexed lazily (no 2.7 GB copy)."""

    def __init__(self, parts: Sequence[Any]):
        self.parts = list(parts)
        self.offsets = np.cumsum([0] + [len(p) for p in self.parts])
        self.shape = (int(self.offsets[-1]), *self.parts[0].shape[1:])

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index: Any) -> np.ndarray:
        if isinstance(index, slice):
            index = np.arange(len(self))[index]
        if np.ndim(index) == 0:
            i = int(index) % len(self)
            part = int(np.searchsorted(self.offsets, i, side="right")) - 1
            return self.parts[part][i - self.offsets[part]]
        idx = np.asarray(index, dtype=np.int64) % len(self)
        part = np.searchsorted(self.offsets, idx, side="right") - 1
        out = np.empty((len(idx), *self.shape[1:]), dtype=np.uint8)
        for p in np.unique(part):
            sel = part == p
            out[sel] = self.parts[p][idx[sel] - self.offsets[p]]
        return out


class STL10(ArrayImages):
    """STL-10: 96x96 RGB images, 5,000 labelled train, 8,000 test, 100,000 unlabelled.

    Args:
        root: folder holding ``stl10_binary/`` (or that folder itself) with ``train_X.bin``,
            ``train_y.bin``, ``test_X.bin``, ``test_y.bin``, ``unlabeled_X.bin`` and
            optionally ``class_names.txt``.
        split: ``"train"``, ``"test"``, ``"unlabeled"`` (labels ``-1``) or
            ``"train+unlabeled"`` (train first, then the unlabelled images).
        download: download and extract the official archive (2.6 GB, MD5-checked) into
            ``root`` when the folder is missing.
    """

    def __init__(self, root: str | os.PathLike[str], split: str = "train", download: bool = False):
        check_split(split, ("train", "test", "unlabeled", "train+unlabeled"), "STL10")
        self.root = Path(root)
        self.split = split
        folder = self.root / _FOLDER
        if not folder.is_dir() and self.root.name == _FOLDER:
            folder = self.root
        if not folder.is_dir():
            if not download:
                raise FileNotFoundError(
                    f"STL10: {folder} not found. Download {_URL} (MD5 {_MD5}) and extract it "
                    f"in {self.root}, or run: {download_command('STL10', self.root)}"
                )
            archive = _download(_URL, self.root / _ARCHIVE, _MD5)
            extract_tar(archive, self.root)
        self.folder = folder
        self._files: list[Path] = []
        parts, labels = [], []
        for part in split.split("+"):
            x = folder / ("unlabeled_X.bin" if part == "unlabeled" else f"{part}_X.bin")
            images = _memmap_images(x)
            self._files.append(x)
            if part == "unlabeled":
                lab = np.full(len(images), UNLABELLED, dtype=np.int64)
            else:
                y = folder / f"{part}_y.bin"
                lab = _read_labels(y, len(images))
                self._files.append(y)
            parts.append(images)
            labels.append(lab)
        images_all = parts[0] if len(parts) == 1 else _Stacked(parts)
        super().__init__(images_all, np.concatenate(labels), self._class_names(folder))

    @staticmethod
    def _class_names(folder: Path) -> list[str]:
        path = folder / "class_names.txt"
        if not path.is_file():
            return list(_DEFAULT_CLASSES)
        names = [line.strip() for line in path.read_text().splitlines() if line.strip()]
        if len(names) != 10:
            raise ValueError(f"{path}: expected 10 class names, found {len(names)}")
        return names

    def fingerprint(self) -> str:
        """Identity of the source files (names, sizes, mtimes) and split, for caches."""
        return f"STL10:{self.split}:" + files_fingerprint(self._files, self.folder)
