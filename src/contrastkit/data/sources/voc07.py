"""Pascal VOC2007 classification data as distributed (``VOCdevkit/VOC2007``).

Layout read (Everingham et al. 2010, the VOC2007 development kit)::

    VOC2007/JPEGImages/<id>.jpg
    VOC2007/ImageSets/Main/<split>.txt            one image id per line
    VOC2007/ImageSets/Main/<class>_<split>.txt    "<id> <flag>": 1 present, -1 absent,
                                                  0 present but only as "difficult" objects

The per-class lists carry the image-level labels and difficult flags the devkit derives from
``Annotations/*.xml``, so the XML files are not read. The classes are those with a
``<class>_<split>.txt`` list (the 20 VOC classes on the real data set), sorted by name.

:func:`read_voc07` gives the targets, an ``(N, C)`` int8 matrix in {1, -1, 0};
:class:`VOC07Images` yields ``(uint8 image (3, H, W), index)``; the image sizes differ, so wrap
it in :class:`~contrastkit.data.sources.wrappers.ResizedSquare` before batching.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from contrastkit.data.decode.images import decode_at_least, decode_image
from contrastkit.data.sources.images._common import files_fingerprint

__all__ = ["VOC07Images", "VOC07Split", "read_voc07", "voc07_root"]

#: Flags of the per-class lists.
PRESENT, ABSENT, DIFFICULT = 1, -1, 0
_MAIN = Path("ImageSets") / "Main"


def voc07_root(root: str | os.PathLike) -> Path:
    """``root`` itself when it holds ``ImageSets/Main``, else ``root/VOC2007`` or
    ``root/VOCdevkit/VOC2007``.

    Raises:
        FileNotFoundError: naming ``root`` when none of these holds ``ImageSets/Main``.
    """
    base = Path(root).expanduser()
    for place in (base, base / "VOC2007", base / "VOCdevkit" / "VOC2007"):
        if (place / _MAIN).is_dir():
            return place
    raise FileNotFoundError(f"--root {root}: no ImageSets/Main folder in it, in VOC2007/ or in "
                            "VOCdevkit/VOC2007/ (expected the VOC2007 development kit layout)")


@dataclass
class VOC07Split:
    """One split: image ids (in the order of ``<split>.txt``), class names, targets
    ``(N, C)`` int8 in {1 present, -1 absent, 0 difficult}, and the JPEG paths."""

    split: str
    ids: list[str]
    classes: list[str]
    targets: np.ndarray
    paths: list[Path]


def _read_lines(path: Path) -> list[list[str]]:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: VOC2007 list file does not exist")
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


def _class_names(main: Path, split: str) -> list[str]:
    suffix = f"_{split}.txt"
    return sorted(p.name[: -len(suffix)] for p in main.glob(f"*{suffix}"))


def read_voc07(root: str | os.PathLike, split: str,
               classes: list[str] | None = None) -> VOC07Split:
    """Read ``split`` (``trainval``, ``test``, ``train``, ``val``) of a VOC2007 folder.

    Args:
        root: ``VOC2007`` folder, or a folder holding ``VOC2007`` / ``VOCdevkit/VOC2007``.
        split: the split name of ``ImageSets/Main/<split>.txt``.
        classes: class names to read (default: every ``<class>_<split>.txt``, sorted).

    Raises:
        FileNotFoundError: naming the missing list file or JPEG.
        ValueError: naming the list file of a malformed line, an unknown flag, ids differing
            from ``<split>.txt``, or a class with no positive image in the split.
    """
    base = voc07_root(root)
    main = base / _MAIN
    ids = [row[0] for row in _read_lines(main / f"{split}.txt")]
    if not ids:
        raise ValueError(f"{main / f'{split}.txt'}: no image ids in it")
    names = list(classes) if classes else _class_names(main, split)
    if not names:
        raise FileNotFoundError(f"{main}: no <class>_{split}.txt lists for split {split}")
    position = {image_id: i for i, image_id in enumerate(ids)}
    targets = np.zeros((len(ids), len(names)), dtype=np.int8)
    for c, name in enumerate(names):
        path = main / f"{name}_{split}.txt"
        rows = _read_lines(path)
        seen = np.zeros(len(ids), dtype=bool)
        for number, row in enumerate(rows, start=1):
            if len(row) != 2 or row[1] not in ("1", "-1", "0"):
                raise ValueError(f"{path}, line {number}: expected '<image id> <1|-1|0>', got "
                                 f"{' '.join(row)!r}")
            if row[0] not in position:
                raise ValueError(f"{path}, line {number}: image {row[0]} is not in {split}.txt")
            targets[position[row[0]], c] = int(row[1])
            seen[position[row[0]]] = True
        if not seen.all():
            missing = ids[int(np.argmin(seen))]
            raise ValueError(f"{path}: image {missing} of {split}.txt is not listed "
                             f"({int((~seen).sum())} missing)")
        if not (targets[:, c] == PRESENT).any():
            raise ValueError(f"{path}: class {name} has no positive image in split {split}")
    paths = [base / "JPEGImages" / f"{image_id}.jpg" for image_id in ids]
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(f"{p}: image listed in {main / f'{split}.txt'} does not "
                                    "exist")
    return VOC07Split(split, ids, names, targets, paths)


class VOC07Images(Dataset):
    """The JPEGs of a :class:`VOC07Split`: ``ds[i] = (uint8 (3, H, W), i)``.

    The label slot holds the image's index (the targets are a matrix, ``split.targets``).
    """

    def __init__(self, split: VOC07Split) -> None:
        self.split = split
        self.targets = list(range(len(split.ids)))
        self.classes = split.classes

    def __len__(self) -> int:
        return len(self.split.ids)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.from_numpy(decode_image(self.split.paths[i])), i

    def read_at_least(self, i: int, side: int) -> tuple[torch.Tensor, int]:
        """Item ``i`` decoded reduced as far as its shorter side stays at least ``side``
        (:func:`~contrastkit.data.decode.images.decode_at_least`), for
        :class:`~contrastkit.data.sources.wrappers.ResizedSquare`: a large JPEG is decoded at a DCT
        scale, never at full size."""
        return torch.from_numpy(decode_at_least(self.split.paths[i], side)), i

    def fingerprint(self) -> str:
        """Names, sizes and times of the images, in the split's order (for the feature cache)."""
        return files_fingerprint(self.split.paths, self.split.paths[0].parent.parent)
