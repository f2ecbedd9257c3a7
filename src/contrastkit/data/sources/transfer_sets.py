"""Readers of the image fine-tuning sets of DySTreSS (Manna et al. 2023, Table 11 and appendix
A.2) in the layouts they are distributed in.

Each reader returns a :class:`FileList` (image paths, integer labels, class names) of one split;
:class:`FileListImages` decodes its images (``(uint8 (3, H, W), label)``; sizes differ, wrap it
in :class:`~contrastkit.data.sources.wrappers.ResizedSquare` before batching).

* ``flowers102`` (Nilsback & Zisserman 2008): ``jpg/image_NNNNN.jpg``, ``imagelabels.mat``
  (``labels``, 1..102 per image) and ``setid.mat`` (``trnid`` / ``valid`` / ``tstid``, 1-based
  image numbers); splits ``train``, ``val``, ``trainval``, ``test``.
* ``mura`` (Rajpurkar et al. 2017): ``MURA-v1.1/{train,valid}_image_paths.csv`` (one image path
  per line, relative to the folder holding ``MURA-v1.1``) and
  ``{train,valid}_labeled_studies.csv`` (``study folder,label``); an image takes its study's
  label (1 abnormal); splits ``train``, ``valid``.
* ``isic2016`` (Gutman et al. 2016, part 3, lesion classification):
  ``ISBI2016_ISIC_Part3_{Training,Test}_Data/<id>.jpg`` and
  ``ISBI2016_ISIC_Part3_{Training,Test}_GroundTruth.csv`` (``id,benign|malignant`` or
  ``id,0|1``); splits ``train``, ``test``.
* ``mhist`` (Wei et al. 2021): ``annotations.csv`` (``Image Name``, ``Majority Vote Label``
  HP / SSA, ``Partition`` train / test) and ``images/``; SSA is the positive class.
* ``chaoyang`` (Zhu et al. 2021): ``train.json`` / ``test.json``, lists of
  ``{"name": path relative to the root, "label": 0..3}``.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from contrastkit.data.decode.images import (
    FORMATS,
    UnreadableImageError,
    decode_at_least,
    decode_image,
    pillow,
    quiet_bomb_warning,
)

__all__ = ["TRANSFER_SETS", "FileList", "FileListImages", "check_images", "read_transfer_set"]


@dataclass
class FileList:
    """One split: image paths, labels (``0..len(classes)-1``) and class names."""

    paths: list[Path]
    labels: list[int]
    classes: list[str]


class FileListImages(Dataset):
    """The images of a :class:`FileList`: ``ds[i] = (uint8 (3, H, W), label)``."""

    def __init__(self, files: FileList) -> None:
        self.files, self.classes, self.targets = files, files.classes, files.labels

    def __len__(self) -> int:
        return len(self.files.paths)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.from_numpy(decode_image(self.files.paths[i])), self.files.labels[i]

    def read_at_least(self, i: int, side: int) -> tuple[torch.Tensor, int]:
        """Item ``i`` decoded reduced as far as its shorter side stays at least ``side``
        (:func:`~contrastkit.data.decode.images.decode_at_least`), for
        :class:`~contrastkit.data.sources.wrappers.ResizedSquare`: a large JPEG is decoded at a DCT
        scale, a PNG box-averaged right after decoding."""
        path = self.files.paths[i]
        return torch.from_numpy(decode_at_least(path, side)), self.files.labels[i]


def check_images(files: FileList) -> None:
    """Open the header of every image (not its pixels), so that a file that is not an image
    stops a run before training rather than at the test set.

    Raises:
        UnreadableImageError: naming the first such file.
    """
    image_mod = pillow()
    for path in files.paths:
        try:
            with quiet_bomb_warning(image_mod):
                image_mod.open(path).close()  # the header only: open parses it, decodes nothing
        except (OSError, SyntaxError, ValueError) as err:
            raise UnreadableImageError(f"{path}: unreadable image (expected a decodable "
                                       f"{FORMATS} file): {err}") from None


def _need(path: Path, what: str) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"{path}: {what} does not exist")
    return path


def _check_split(name: str, split: str, allowed: tuple[str, ...]) -> None:
    if split not in allowed:
        raise ValueError(f"--data {name}: split {split!r} is not one of {', '.join(allowed)}")


def _csv_rows(path: Path) -> list[list[str]]:
    with _need(path, "list file").open(newline="") as handle:
        return [row for row in csv.reader(handle) if row and any(c.strip() for c in row)]


def _checked(files: FileList, source: Path) -> FileList:
    """Every image exists and every class has an image in the split."""
    if not files.paths:
        raise ValueError(f"{source}: no images in this split")
    for p in files.paths:
        _need(p, f"image listed in {source.name}")
    present = set(files.labels)
    for index, name in enumerate(files.classes):
        if index not in present:
            raise ValueError(f"{source}: class {name} has no image in this split")
    return files


def _flowers102(root: Path, split: str) -> FileList:
    from scipy.io import loadmat

    _check_split("flowers102", split, ("train", "val", "trainval", "test"))
    labels_mat = _need(root / "imagelabels.mat", "Flowers-102 label file")
    setid_mat = _need(root / "setid.mat", "Flowers-102 split file")
    try:
        labels = np.asarray(loadmat(labels_mat)["labels"]).reshape(-1).astype(np.int64)
        sets = loadmat(setid_mat)
        keys = {"train": ["trnid"], "val": ["valid"], "trainval": ["trnid", "valid"],
                "test": ["tstid"]}[split]
        ids = np.concatenate([np.asarray(sets[k]).reshape(-1) for k in keys]).astype(np.int64)
    except (KeyError, ValueError, OSError) as err:
        raise ValueError(f"{root}: imagelabels.mat / setid.mat unreadable ({err})") from None
    if ids.min() < 1 or ids.max() > labels.shape[0]:
        raise ValueError(f"{setid_mat}: image numbers outside 1..{labels.shape[0]}")
    classes = [str(c) for c in range(1, int(labels.max()) + 1)]
    paths = [root / "jpg" / f"image_{i:05d}.jpg" for i in ids]
    return _checked(FileList(paths, [int(labels[i - 1]) - 1 for i in ids], classes), setid_mat)


def _mura(root: Path, split: str) -> FileList:
    _check_split("mura", split, ("train", "valid"))
    base = root / "MURA-v1.1" if (root / "MURA-v1.1").is_dir() else root
    studies_csv = base / f"{split}_labeled_studies.csv"
    studies = {}
    for number, row in enumerate(_csv_rows(studies_csv), start=1):
        if len(row) != 2 or row[1].strip() not in ("0", "1"):
            raise ValueError(f"{studies_csv}, line {number}: expected 'study folder,0|1'")
        studies[row[0].strip().rstrip("/")] = int(row[1])
    images_csv = base / f"{split}_image_paths.csv"
    paths, labels = [], []
    for number, row in enumerate(_csv_rows(images_csv), start=1):
        study = os.path.dirname(row[0].strip())
        if study not in studies:
            raise ValueError(f"{images_csv}, line {number}: study {study} is not in "
                             f"{studies_csv.name}")
        paths.append(base.parent / row[0].strip())
        labels.append(studies[study])
    return _checked(FileList(paths, labels, ["normal", "abnormal"]), images_csv)


def _isic2016(root: Path, split: str) -> FileList:
    _check_split("isic2016", split, ("train", "test"))
    part = {"train": "Training", "test": "Test"}[split]
    truth = root / f"ISBI2016_ISIC_Part3_{part}_GroundTruth.csv"
    names = {"benign": 0, "malignant": 1, "0": 0, "1": 1, "0.0": 0, "1.0": 1}
    paths, labels = [], []
    for number, row in enumerate(_csv_rows(truth), start=1):
        if len(row) != 2 or row[1].strip() not in names:
            raise ValueError(f"{truth}, line {number}: expected 'image id,benign|malignant'")
        paths.append(root / f"ISBI2016_ISIC_Part3_{part}_Data" / f"{row[0].strip()}.jpg")
        labels.append(names[row[1].strip()])
    return _checked(FileList(paths, labels, ["benign", "malignant"]), truth)


def _mhist(root: Path, split: str) -> FileList:
    _check_split("mhist", split, ("train", "test"))
    table = root / "annotations.csv"
    rows = _csv_rows(table)
    header = [c.strip() for c in rows[0]] if rows else []
    try:
        name_col, label_col, part_col = (header.index(c) for c in (
            "Image Name", "Majority Vote Label", "Partition"))
    except ValueError:
        raise ValueError(f"{table}: expected the columns Image Name, Majority Vote Label and "
                         "Partition") from None
    paths, labels = [], []
    for number, row in enumerate(rows[1:], start=2):
        if row[part_col].strip() != split:
            continue
        if row[label_col].strip() not in ("HP", "SSA"):
            raise ValueError(f"{table}, line {number}: label {row[label_col]!r} is not HP or SSA")
        paths.append(root / "images" / row[name_col].strip())
        labels.append(int(row[label_col].strip() == "SSA"))
    return _checked(FileList(paths, labels, ["HP", "SSA"]), table)


def _chaoyang(root: Path, split: str) -> FileList:
    _check_split("chaoyang", split, ("train", "test"))
    listing = _need(root / f"{split}.json", "Chaoyang list file")
    try:
        entries = json.loads(listing.read_text())
        paths = [root / str(e["name"]) for e in entries]
        labels = [int(e["label"]) for e in entries]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{listing}: expected a JSON list of {{\"name\", \"label\"}} ({err})") \
            from None
    if any(not 0 <= y <= 3 for y in labels):
        raise ValueError(f"{listing}: labels must be 0..3")
    classes = ["normal", "serrated", "adenocarcinoma", "adenoma"]
    return _checked(FileList(paths, labels, classes), listing)


#: Reader of each set, by ``--data`` name.
TRANSFER_SETS: dict[str, Callable[[Path, str], FileList]] = {
    "flowers102": _flowers102, "mura": _mura, "isic2016": _isic2016, "mhist": _mhist,
    "chaoyang": _chaoyang,
}


def read_transfer_set(name: str, root: str | os.PathLike, split: str) -> FileList:
    """Split ``split`` of the set ``name`` (:data:`TRANSFER_SETS`) under ``root``.

    Raises:
        FileNotFoundError: naming a missing list file or image.
        ValueError: naming the list file of a malformed line, or a class with no image.
    """
    if name not in TRANSFER_SETS:
        raise ValueError(f"--data {name!r} is not one of {', '.join(TRANSFER_SETS)}")
    return TRANSFER_SETS[name](Path(root).expanduser(), split)
