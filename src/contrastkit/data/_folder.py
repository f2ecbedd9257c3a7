"""Datasets of image files: a generic file list and the class-per-folder layout."""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from torch.utils.data import Dataset

from ._common import files_fingerprint
from ._images import IMAGE_EXTENSIONS, UnreadableImageError, decode_image, is_image_file


class ImageFiles(Dataset):
    """Images decoded lazily from files, one ``(path, label)`` per sample.

    Args:
        samples: ``(path, label)`` pairs, in dataset order.
        classes: class names; labels index into it.
        root: folder the paths live under (for messages and fingerprints).
        skip_corrupt: when ``False`` (default) an unreadable file raises
            :class:`UnreadableImageError` naming it when the sample is read. When ``True``,
            every file is fully decoded once **up front** (in this constructor, with
            ``workers`` threads), unreadable ones are removed from ``samples``, and a single
            ``UserWarning`` says how many were skipped and names the first few. A file that
            becomes unreadable after that check still raises when read.
        workers: threads for the up-front check.

    ``ds[i]`` returns ``(uint8 tensor (3, H, W), int)``.
    """

    def __init__(
        self,
        samples: Sequence[tuple[str, int]],
        classes: Sequence[str],
        root: str | os.PathLike[str],
        skip_corrupt: bool = False,
        workers: int = 2,
    ):
        self.root = Path(root)
        self.classes = list(classes)
        samples = [(str(p), int(y)) for p, y in samples]
        if skip_corrupt:
            samples = _drop_unreadable(samples, self.root, workers)
        self.samples = samples
        self.targets: list[int] = [y for _, y in samples]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        return torch.from_numpy(decode_image(path)), label

    def fingerprint(self) -> str:
        """Identity of the sample files (relative names, sizes, mtimes) and labels."""
        labels = ",".join(map(str, self.targets))
        tag = files_fingerprint([p for p, _ in self.samples], self.root)
        return f"{type(self).__name__}:{'|'.join(self.classes)}:{hash_text(labels)}:{tag}"


def hash_text(text: str) -> str:
    """Short SHA-256 of a string."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _readable(path: str) -> bool:
    try:
        decode_image(path)
    except (UnreadableImageError, OSError):
        return False
    return True


def _drop_unreadable(
    samples: list[tuple[str, int]], root: Path, workers: int
) -> list[tuple[str, int]]:
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        ok = list(pool.map(_readable, [p for p, _ in samples], chunksize=64))
    bad = [p for (p, _), good in zip(samples, ok, strict=True) if not good]
    if bad:
        shown = ", ".join(os.path.relpath(p, root) for p in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        warnings.warn(
            f"skipped {len(bad)} unreadable image file(s) of {len(samples)} under {root}: "
            f"{shown}{more}",
            UserWarning,
            stacklevel=3,
        )
    return [s for s, good in zip(samples, ok, strict=True) if good]


def list_class_dirs(root: Path) -> list[str]:
    """Sorted names of the non-hidden sub-folders of ``root``."""
    if not root.is_dir():
        raise FileNotFoundError(f"image folder {root} does not exist")
    return sorted(e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))


def list_images(folder: Path, extensions: tuple[str, ...] = IMAGE_EXTENSIONS) -> list[str]:
    """Sorted paths of the image files under ``folder`` (recursively)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True):
        dirnames.sort()
        found.extend(
            os.path.join(dirpath, f) for f in sorted(filenames) if is_image_file(f, extensions)
        )
    return found


def scan_folder(
    root: str | os.PathLike[str],
    classes: Sequence[str] | None = None,
    extensions: tuple[str, ...] = IMAGE_EXTENSIONS,
) -> tuple[list[tuple[str, int]], list[str]]:
    """List ``root/<class>/**/<image>`` files with their labels.

    Args:
        root: folder with one sub-folder per class.
        classes: optional subset of class folders, in label order; otherwise all sub-folders,
            sorted by name.
        extensions: accepted file extensions (case-insensitive); other files are ignored.

    Returns:
        ``(samples, classes)`` with ``samples`` sorted by class, then path.

    Raises:
        FileNotFoundError: ``root`` is missing.
        ValueError: no class folder, a requested class is absent, or a class has no image.
    """
    root = Path(root)
    present = list_class_dirs(root)
    if classes is None:
        if not present:
            raise ValueError(f"image folder {root} has no class sub-folders")
        classes = present
    else:
        classes = list(classes)
        if len(set(classes)) != len(classes):
            raise ValueError(f"classes: duplicate names in {classes}")
        missing = sorted(set(classes) - set(present))
        if missing:
            raise ValueError(
                f"classes: {len(missing)} requested class folder(s) not in {root}: "
                f"{missing[:10]}{' ...' if len(missing) > 10 else ''}"
            )
    samples: list[tuple[str, int]] = []
    for label, name in enumerate(classes):
        files = list_images(root / name, extensions)
        if not files:
            raise ValueError(
                f"class folder {root / name} contains no image file ({', '.join(extensions)})"
            )
        samples.extend((f, label) for f in files)
    return samples, list(classes)


class ImageFolder(ImageFiles):
    """Images in ``root/<class_name>/**/*.{jpg,jpeg,png,webp}`` (extensions case-insensitive).

    Classes are the sub-folder names sorted alphabetically (label = position), or the
    ``classes`` given, in that order. Images are decoded with Pillow to RGB uint8 ``(3, H, W)``.

    Args:
        root: the folder.
        classes: optional selection of class folders; naming an absent one is a ``ValueError``.
        skip_corrupt: see :class:`ImageFiles` (up-front full decode, one warning).
        extensions: accepted extensions.
        workers: threads for the ``skip_corrupt`` check.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        classes: Sequence[str] | None = None,
        skip_corrupt: bool = False,
        extensions: tuple[str, ...] = IMAGE_EXTENSIONS,
        workers: int = 2,
    ):
        samples, names = scan_folder(root, classes, extensions)
        super().__init__(samples, names, root, skip_corrupt=skip_corrupt, workers=workers)
