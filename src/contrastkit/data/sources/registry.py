"""The dataset registry: a dataset name and a split -> the dataset that pretraining and
evaluation read.

* images: :func:`build_dataset` (one reader of :mod:`contrastkit.data.sources.images.datasets` per
  name; file datasets optionally through the uint8 array cache; an image ``folder`` without
  ``test/`` sub-folder split by a held-out fraction,
  :func:`~contrastkit.data.sources.images.datasets.hold_out`), and
  :func:`open_split`, which adds the load-size resize and the class selection
  (:mod:`contrastkit.data.sources.wrappers`);
* videos (SCE, Denize et al. 2023, section 4.2 and appendix D.3): :func:`build_video_dataset`
  for ``ucf101``, ``hmdb51``, ``kinetics`` and ``video_folder``, with the clips a role needs
  (pretraining pairs, the monitor's centre clip, the 30 evaluation views).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Literal

from torch.utils.data import Dataset

from contrastkit.data.decode.images import IMAGE_EXTENSIONS
from contrastkit.data.sources import shards
from contrastkit.data.sources.images import datasets
from contrastkit.data.sources.images._common import is_hidden
from contrastkit.data.sources.pack_state import check_complete
from contrastkit.data.sources.wrappers import CentreClip, ResizedSquare, select_classes
from contrastkit.data.specs import VideoDataSpec

__all__ = [
    "DATASET_NAMES",
    "VIDEO_DATASETS",
    "DatasetName",
    "MissingSplitError",
    "build_dataset",
    "build_video_dataset",
    "files_not_read",
    "is_labelled",
    "is_video_dataset",
    "not_read_line",
    "open_split",
    "skipped_files",
]

DatasetName = Literal[
    "digits", "cifar10", "cifar100", "stl10", "svhn", "tinyimagenet", "imagenet100",
    "folder", "image_archive", "shards", "ucf101", "hmdb51", "kinetics", "video_folder",
]
DATASET_NAMES: tuple[str, ...] = DatasetName.__args__  # type: ignore[attr-defined]


#: Dataset names of :func:`build_video_dataset`.
VIDEO_DATASETS = ("ucf101", "hmdb51", "kinetics", "video_folder")


class MissingSplitError(ValueError):
    """A split that the data does not have (an image folder without that sub-folder and no
    held-out fraction); callers add the option that fixes it."""


def build_dataset(
    name: str, root: str | None, split: str, *, cache_dir: str | None = None,
    image_size: int | None = None, skip_corrupt: bool = False,
    test_fraction: float | None = None, split_seed: int = 0,
) -> Dataset:
    """Open split ``split`` of dataset ``name`` (see :data:`DatasetName`).

    ``folder`` reads ``root/<split>/<class>/*`` when ``root/<split>`` exists. A folder without
    split sub-folders (``root/<class>/*``, or images directly in ``root``: unlabelled) is the
    ``train`` split as a whole; its ``test`` split exists only with ``test_fraction``, which
    holds out that share of each class (stratified, seeded by ``split_seed``, see
    :func:`~contrastkit.data.sources.images.datasets.hold_out`) and leaves the rest as ``train``,
    so the two never share an image. ``image_archive`` reads a ``.tar.gz`` of such folders (for
    example ``cifar10-jpg.tar.gz``) through the array cache; ``shards`` reads ``root/<split>`` as
    written by ``contrastkit data pack --shards`` (:mod:`contrastkit.data.sources.shards`). File
    datasets with a ``cache_dir`` are
    decoded once into the uint8 array cache, resized to ``image_size`` if given. The
    unreadable files left out with ``skip_corrupt`` are listed in the result's ``skipped``.

    Raises:
        ValueError: for an unknown name, a missing ``root``, or ``test_fraction`` with a
            dataset other than ``folder`` or a folder that has a ``test`` sub-folder.
        MissingSplitError: for a folder split that does not exist.
        FileNotFoundError: when the data is not found under ``root``.
    """
    if name not in DATASET_NAMES:
        raise ValueError(f"unknown dataset {name!r}; one of {', '.join(DATASET_NAMES)}")
    if name != "digits" and root is None:
        raise ValueError(f"data.root is required for dataset {name!r}")
    if test_fraction is not None and name != "folder":
        raise ValueError(f"a test fraction applies to dataset 'folder' only, not {name!r} "
                         "(its splits are given)")
    size = (image_size, image_size) if image_size else None
    if name in ("folder", "shards"):  # what `contrastkit data pack` writes: refused unfinished
        check_complete(root)  # type: ignore[arg-type]
    if name == "digits":
        return datasets.Digits(split=split)
    if name == "cifar10":
        return datasets.CIFAR10(root, split=split)
    if name == "cifar100":
        return datasets.CIFAR100(root, split=split)
    if name == "stl10":
        return datasets.STL10(root, split=split)
    if name == "svhn":
        return datasets.SVHN(root, split=split)
    if name == "shards":
        if cache_dir is not None:
            raise ValueError("data.cache_dir does not apply to dataset 'shards' (read in place)")
        if not shards.is_shard_split(Path(root) / split):  # type: ignore[arg-type]
            raise MissingSplitError(f"shards {root} have no {split}/ split (no "
                                    f"{split}/{shards.INDEX_JSON}; write them with "
                                    "`contrastkit data pack SRC DEST --shards`)")
        return shards.ShardImages(Path(root) / split)  # type: ignore[arg-type]
    if name == "image_archive":
        if cache_dir is None:
            raise ValueError("dataset 'image_archive' needs data.cache_dir (it is decoded once)")
        return datasets.ArrayCache.build_or_load(root, cache_dir, subdir=split, size=size,
                                                 skip_corrupt=skip_corrupt)
    if name == "tinyimagenet":
        files: datasets.ImageFiles = datasets.TinyImageNet(root, split=split,
                                                           skip_corrupt=skip_corrupt)
    elif name == "imagenet100":
        files = datasets.ImageNet100(root, split=split, skip_corrupt=skip_corrupt)
    elif name == "folder":
        files = _folder_split(Path(root), split, skip_corrupt, test_fraction, split_seed)  # type: ignore[arg-type]
    else:
        raise ValueError(f"dataset {name!r} is a video dataset: open it with "
                         "build_video_dataset")
    if cache_dir is not None:
        cached = datasets.ArrayCache.build_or_load(files, cache_dir, size=size,
                                                   skip_corrupt=skip_corrupt)
        cached.skipped = list(files.skipped)
        cached.not_images = list(files.not_images)  # type: ignore[attr-defined]
        return cached
    return files


def _folder_split(root: Path, split: str, skip_corrupt: bool, test_fraction: float | None,
                  split_seed: int) -> datasets.ImageFiles:
    if test_fraction is not None and split in ("train", "test"):
        if (root / "test").is_dir():
            raise ValueError(f"image folder {root} has a test/ sub-folder: it is the test "
                             "split, a test fraction would split the data a second way")
        base = root / "train" if (root / "train").is_dir() else root
        whole = datasets.open_image_folder(base, skip_corrupt=skip_corrupt)
        return datasets.hold_out(whole, test_fraction, split_seed, split)
    if (root / split).is_dir():
        return datasets.open_image_folder(root / split, skip_corrupt=skip_corrupt)
    if split == "train":
        return datasets.open_image_folder(root, skip_corrupt=skip_corrupt)
    raise MissingSplitError(f"image folder {root} has no {split}/ sub-folder")


def skipped_files(dataset: Dataset) -> list[str]:
    """The unreadable files a dataset from :func:`build_dataset` left out (``skip_corrupt``)."""
    return list(getattr(dataset, "skipped", []))


def files_not_read(dataset: Dataset) -> list[str]:
    """The files of the folders a dataset from :func:`build_dataset` (or a wrapper of it) was
    listed from that it does not read: another extension than
    :data:`~contrastkit.data.decode.images.IMAGE_EXTENSIONS`, or beside the class folders."""
    seen: list[object] = []
    while dataset is not None and dataset not in seen:
        found = getattr(dataset, "not_images", None)
        if found is not None:
            return list(found)
        seen.append(dataset)
        dataset = getattr(dataset, "dataset", None)
    return []


def not_read_line(root: str | None, files: list[str]) -> str | None:
    """One line counting ``files`` (:func:`files_not_read`) by extension (hidden ones, files
    and folders, as ``hidden``), or None for none."""
    if not files:
        return None
    counts = Counter("hidden" if is_hidden(os.path.basename(f))
                     else os.path.splitext(f)[1].lower() or "no extension" for f in files)
    kinds = ", ".join(f"{n} {ext}" for ext, n in sorted(counts.items(),
                                                        key=lambda e: (-e[1], e[0])))
    return (f"data: {root}: {len(files)} file(s) not read as images ({kinds}; the formats "
            f"read: {', '.join(IMAGE_EXTENSIONS)}, in class folders)")


def open_split(
    name: str, root: str | None, split: str, *, cache_dir: str | None = None,
    image_size: int | None = None, load_size: int | None = None,
    classes: list[str] | None = None, skip_corrupt: bool = False,
    test_fraction: float | None = None, split_seed: int = 0, any_size: bool = False,
) -> tuple[Dataset, list[str]]:
    """:func:`build_dataset`, then :class:`ResizedSquare` (``load_size``) and
    :func:`select_classes` (``classes``): the images pretraining and evaluation read.

    An image ``folder``'s headers are read first (a non-image fails now); without
    ``load_size`` its images must share one size unless ``any_size`` (images cropped one by
    one in the loader, :mod:`contrastkit.data.loading.crops`).

    Returns:
        ``(dataset, skipped)``: the dataset and the unreadable files it left out.
    """
    dataset = build_dataset(name, root, split, cache_dir=cache_dir, image_size=image_size,
                            skip_corrupt=skip_corrupt, test_fraction=test_fraction,
                            split_seed=split_seed)
    skipped = skipped_files(dataset)
    if skipped and len(dataset) == 0:  # type: ignore[arg-type]
        folder = getattr(dataset, "root", root)
        raise ValueError(f"no readable images in {folder} (split {split}): all {len(skipped)} "
                         "image files there are unreadable")
    if name == "folder" and isinstance(dataset, datasets.ImageFiles) and not (
            skip_corrupt and load_size is not None):
        # your own images: fail now, not at the first batch, on a non-image or mixed sizes
        datasets.check_headers(dataset, same_size=load_size is None and not any_size)
    if load_size is not None:
        dataset = ResizedSquare(dataset, load_size)
    if classes is not None:
        dataset = select_classes(dataset, classes)
    return dataset, skipped


def is_labelled(dataset: Dataset) -> bool:
    """Whether ``dataset`` has classes (an unlabelled image folder has none)."""
    return bool(getattr(dataset, "classes", []))


# --- videos --------------------------------------------------------------------------------------
def is_video_dataset(name: str) -> bool:
    """Whether ``name`` is one of :data:`VIDEO_DATASETS`."""
    return name in VIDEO_DATASETS


def _kinetics_csv(annotations: str, split: str) -> tuple[Path, str | None]:
    """(CSV path, value of its ``split`` column to keep or None) for Kinetics ``split``."""
    if "{split}" in annotations:
        return Path(annotations.format(split=split)), None
    path = Path(annotations).expanduser()
    if path.is_dir():
        return path / f"{split}.csv", None
    return path, split


Role = Literal["train", "monitor", "eval"]


def build_video_dataset(
    name: str, root: str | None, split: str, spec: VideoDataSpec | None = None, *,
    role: Role = "train", skip_corrupt: bool = False, eval_clips: int = 10,
) -> Dataset:
    """Open split ``split`` of the video dataset ``name`` (:data:`VIDEO_DATASETS`).

    Args:
        name: ``ucf101`` / ``hmdb51`` (``split`` ``train`` or ``test`` of ``spec.fold``),
            ``kinetics`` (see :class:`~contrastkit.data.specs.VideoDataSpec`) or
            ``video_folder`` (``root/<split>/<class>/*`` or, when that folder does not exist,
            ``root/<class>/*``).
        root: video folder.
        split: split name.
        spec: clip sampling options (default :class:`VideoDataSpec`).
        role: ``train``: items ``([clip] * spec.num_clips, label)`` of random clips, random
            ``crop_size`` squares; ``monitor``: the centre clip, centre crop (:class:`CentreClip`);
            ``eval``: ``eval_clips`` clips x 3 crops per item (30 views, Denize et al. 2023,
            appendix D.3).
        skip_corrupt: skip unreadable videos (counted and warned about once each).
        eval_clips: temporal clips of the ``eval`` role.

    Raises:
        ValueError: unknown name, missing ``root`` or ``annotations``, bad options.
        FileNotFoundError: missing annotation files or videos (without ``skip_corrupt``).
    """
    from contrastkit.data.sources import video

    spec = spec or VideoDataSpec()
    if name not in VIDEO_DATASETS:
        raise ValueError(f"video dataset must be one of {VIDEO_DATASETS}, got {name!r}")
    if root is None:
        raise ValueError(f"data.root is required for dataset {name!r}")
    options: dict = {"frames": spec.frames, "duration_s": spec.duration_s,
                     "short_side": spec.short_side, "crop_size": spec.crop_size,
                     "skip_corrupt": skip_corrupt, "threads": spec.threads}
    if role == "train":
        options.update(mode="train", num_clips=spec.num_clips,
                       jitter=tuple(spec.duration_jitter) if spec.duration_jitter else None)
    elif role in ("monitor", "eval"):
        options.update(mode="eval", eval_clips=1 if role == "monitor" else eval_clips)
    else:
        raise ValueError(f"role must be 'train', 'monitor' or 'eval', got {role!r}")
    dataset: video.ClipDataset
    if name in ("ucf101", "hmdb51"):
        if spec.annotations is None:
            raise ValueError(f"dataset {name!r} needs data.video.annotations (the official "
                             "split files folder)")
        cls = video.UCF101 if name == "ucf101" else video.HMDB51
        dataset = cls(root, spec.annotations, split=split, fold=spec.fold, **options)
    elif name == "kinetics":
        if spec.annotations is None:
            raise ValueError("dataset 'kinetics' needs data.video.annotations (a folder of "
                             "<split>.csv files, a path with {split}, or one CSV)")
        csv, column = _kinetics_csv(spec.annotations, split)
        dataset = video.Kinetics(root, csv, split=column, **options)
    else:
        base = Path(root).expanduser()
        dataset = video.VideoFolder(base / split if (base / split).is_dir() else base, **options)
    dataset.targets = [label for _, label in dataset.samples]  # type: ignore[attr-defined]
    return CentreClip(dataset) if role == "monitor" else dataset
