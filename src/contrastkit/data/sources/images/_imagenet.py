"""Tiny-ImageNet-200 and ImageNet-100 (ImageNet subsets stored as image files)."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from ._common import check_split
from ._folder import ImageFiles, scan_folder

_TINY = "tiny-imagenet-200"


def imagenet100_classes() -> list[str]:
    """The 100 WordNet ids of ImageNet-100, in the order of SCE appendix C (Table 22).

    Denize et al. take the list from CMC (Tian et al., 2020); it ships with contrastkit as
    ``contrastkit/data/sources/images/imagenet100_classes.txt`` and is read with
    ``importlib.resources``.
    """
    text = resources.files(__package__).joinpath("imagenet100_classes.txt").read_text()
    return [line.strip() for line in text.splitlines() if line.strip()]


class ImageNet100(ImageFiles):
    """The 100-class ImageNet subset of CMC / SCE, selected from a full ImageNet folder.

    Args:
        imagenet_root: ImageNet folder with ``train/<wnid>/*.JPEG`` and ``val/<wnid>/*.JPEG``
            (the validation images sorted into class folders, the usual preparation).
        split: ``"train"`` or ``"val"``.
        skip_corrupt: see :class:`ImageFiles`.
        workers: threads for the ``skip_corrupt`` check.

    ``classes`` are the 100 wnids sorted alphabetically (label = position), so labels agree
    with an ``ImageFolder`` over a folder holding only those classes. A missing class folder
    is a ``ValueError`` naming it.
    """

    def __init__(
        self,
        imagenet_root: str | os.PathLike[str],
        split: str = "train",
        skip_corrupt: bool = False,
        workers: int = 2,
    ):
        check_split(split, ("train", "val"), "ImageNet100")
        root = Path(imagenet_root) / split
        samples, classes = scan_folder(root, sorted(imagenet100_classes()))
        super().__init__(samples, classes, root, skip_corrupt=skip_corrupt, workers=workers)
        self.split = split


class TinyImageNet(ImageFiles):
    """Tiny-ImageNet-200: 64x64 images of 200 classes, 100,000 train and 10,000 val.

    Layout (official zip ``tiny-imagenet-200.zip``): ``wnids.txt`` (the 200 wnids),
    ``words.txt`` (optional, wnid -> words), ``train/<wnid>/images/*.JPEG`` and
    ``val/images/*.JPEG`` labelled by ``val/val_annotations.txt`` (``file<TAB>wnid<TAB>box``).

    Args:
        root: folder holding ``tiny-imagenet-200/``, or that folder itself.
        split: ``"train"`` or ``"val"`` (the test split has no labels and is not read).
        skip_corrupt: see :class:`ImageFiles`.
        workers: threads for the ``skip_corrupt`` check.

    ``classes`` are the wnids sorted alphabetically; ``class_words`` holds their descriptions
    from ``words.txt`` (the wnid itself when absent).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        split: str = "train",
        skip_corrupt: bool = False,
        workers: int = 2,
    ):
        check_split(split, ("train", "val"), "TinyImageNet")
        base = Path(root)
        if not (base / "wnids.txt").is_file() and (base / _TINY).is_dir():
            base = base / _TINY
        wnids_file = base / "wnids.txt"
        if not wnids_file.is_file():
            raise FileNotFoundError(
                f"TinyImageNet: missing {wnids_file}; extract tiny-imagenet-200.zip "
                f"(http://cs231n.stanford.edu/tiny-imagenet-200.zip) into {root}"
            )
        classes = sorted({w.strip() for w in wnids_file.read_text().split() if w.strip()})
        if split == "train":
            samples, classes = scan_folder(base / "train", classes)
        else:
            samples = _val_samples(base / "val", classes)
        super().__init__(samples, classes, base, skip_corrupt=skip_corrupt, workers=workers)
        self.split = split
        self.class_words = _words(base / "words.txt", classes)


def _val_samples(val: Path, classes: list[str]) -> list[tuple[str, int]]:
    ann = val / "val_annotations.txt"
    if not ann.is_file():
        raise FileNotFoundError(f"TinyImageNet: missing {ann} (file<TAB>wnid per line)")
    index = {w: i for i, w in enumerate(classes)}
    samples = []
    for lineno, line in enumerate(ann.read_text().splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2 or fields[1] not in index:
            raise ValueError(f"{ann}:{lineno}: expected 'file<TAB>wnid' with a wnid of wnids.txt")
        path = val / "images" / fields[0]
        if not path.is_file():
            raise FileNotFoundError(f"{ann}:{lineno}: image {path} does not exist")
        samples.append((str(path), index[fields[1]]))
    if not samples:
        raise ValueError(f"{ann} lists no image")
    return samples


def _words(path: Path, classes: list[str]) -> list[str]:
    words: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            wnid, _, text = line.partition("\t")
            words[wnid.strip()] = text.strip()
    return [words.get(w, w) for w in classes]
