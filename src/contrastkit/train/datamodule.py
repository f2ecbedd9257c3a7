"""Lightning data module for pretraining: uint8 batches, augmentation happens on the device.

Loaders only decode and stack uint8 images; views are made by the
:class:`~contrastkit.train.module.PretrainModule` on whatever device the batch lands on.

Shuffling is a pure function of ``(seed, epoch)`` (:class:`EpochShuffleSampler`, which also
gives each process its block of every global batch when several processes train), so a
resumed run sees exactly the batches an uninterrupted run would. Validation loaders (the kNN
bank and the queries) are sharded across processes without padding (:class:`ShardSampler`);
the module gathers the shards back.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import DataLoader, Dataset, Sampler, Subset

from contrastkit.data import datasets
from contrastkit.train.specs import VideoDataSpec

DatasetName = Literal[
    "digits", "cifar10", "cifar100", "stl10", "svhn", "tinyimagenet", "imagenet100",
    "folder", "image_archive", "ucf101", "hmdb51", "kinetics", "video_folder",
]
DATASET_NAMES: tuple[str, ...] = DatasetName.__args__  # type: ignore[attr-defined]


class EpochShuffleSampler(Sampler[int]):
    """A permutation of ``range(n)`` drawn from ``seed + epoch``; Lightning calls ``set_epoch``.

    With ``world_size`` processes, the permutation is cut into global batches of
    ``world_size * batch_size`` indices and process ``rank`` takes the ``rank``-th contiguous
    block of ``batch_size`` of each (an incomplete last global batch is dropped). Gathering the
    processes' batches in rank order then gives exactly the global batch one process would
    draw with ``batch_size * world_size``, rows in the same order, so that even a memory
    queue's first-in-first-out order matches a one-process run on the combined batch (which
    ``DistributedSampler``'s interleaved shards would not).
    """

    def __init__(self, n: int, seed: int = 0, *, rank: int = 0, world_size: int = 1,
                 batch_size: int = 1) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must lie in [0, {world_size}), got {rank}")
        self.n, self.seed = n, seed
        self.rank, self.world_size, self.batch_size = rank, world_size, batch_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the permutation of ``epoch``."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(self.n, generator=generator)
        if self.world_size == 1:
            return iter(order.tolist())
        step = self.world_size * self.batch_size
        usable = self.n - self.n % step
        blocks = order[:usable].view(-1, self.world_size, self.batch_size)[:, self.rank]
        return iter(blocks.reshape(-1).tolist())

    def __len__(self) -> int:
        if self.world_size == 1:
            return self.n
        return self.n // (self.world_size * self.batch_size) * self.batch_size


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
    :func:`~contrastkit.data.datasets.hold_out`) and leaves the rest as ``train``, so the two
    never share an image. ``image_archive`` reads a ``.tar.gz`` of such folders (for example
    ``cifar10-jpg.tar.gz``) through the array cache. File datasets with a ``cache_dir`` are
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
                         "contrastkit.train.video.build_video_dataset")
    if cache_dir is not None:
        cached = datasets.ArrayCache.build_or_load(files, cache_dir, size=size,
                                                   skip_corrupt=skip_corrupt)
        cached.skipped = list(files.skipped)
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


def open_split(
    name: str, root: str | None, split: str, *, cache_dir: str | None = None,
    image_size: int | None = None, load_size: int | None = None,
    classes: list[str] | None = None, skip_corrupt: bool = False,
    test_fraction: float | None = None, split_seed: int = 0,
) -> tuple[Dataset, list[str]]:
    """:func:`build_dataset`, then :class:`ResizedSquare` (``load_size``) and
    :func:`select_classes` (``classes``): the images pretraining and evaluation read.

    Returns:
        ``(dataset, skipped)``: the dataset and the unreadable files it left out.
    """
    dataset = build_dataset(name, root, split, cache_dir=cache_dir, image_size=image_size,
                            skip_corrupt=skip_corrupt, test_fraction=test_fraction,
                            split_seed=split_seed)
    skipped = skipped_files(dataset)
    if name == "folder" and isinstance(dataset, datasets.ImageFiles) and not (
            skip_corrupt and load_size is not None):
        # your own images: fail now, not at the first batch, on a non-image or mixed sizes
        datasets.check_headers(dataset, same_size=load_size is None)
    if load_size is not None:
        dataset = ResizedSquare(dataset, load_size)
    if classes is not None:
        dataset = select_classes(dataset, classes)
    return dataset, skipped


def is_labelled(dataset: Dataset) -> bool:
    """Whether ``dataset`` has classes (an unlabelled image folder has none)."""
    return bool(getattr(dataset, "classes", []))


class PretrainDataModule(L.LightningDataModule):
    """Datasets and loaders for pretraining and the online kNN monitor.

    Args:
        dataset: dataset name (:data:`DatasetName`); ``digits`` needs no files.
        root: dataset folder or archive.
        train_split: split used for pretraining (e.g. ``train+unlabeled`` for STL-10).
        bank_split: labelled split for the kNN bank (default: ``train``).
        val_split: split whose kNN accuracy is monitored (``None``: no monitor).
        batch_size: images per process per step (>= 2).
        num_workers: loader processes.
        cache_dir: folder of the uint8 array cache for file datasets.
        image_size: resize file images to this size when caching.
        load_size: resize each decoded image in the loader workers so its shorter side is
            ``load_size``, then centre-crop it to ``load_size`` x ``load_size`` (for folders
            of images of different sizes, e.g. ImageNet with 256: the views' random crops are
            then taken within that centre square, an approximation of cropping the full image).
        classes: keep only these classes (names from the dataset's ``classes``), relabelled
            0..len(classes)-1 in the given order, in every split (e.g. CIFAR-2: cat vs dog).
        subset: keep only the first ``subset`` images of a fixed shuffle of the training split
            (CPU-scale studies).
        long_tail_ratio: keep a long-tailed subset (``n_max * ratio^(c/(C-1))`` per class).
        monitor_bank_size: cap on the number of bank images for the kNN monitor.
        seed: shuffling seed.
        skip_corrupt: skip unreadable image (or video) files with one warning that counts them;
            the skipped image files are listed in ``skipped`` (and in the run folder's
            ``skipped_files.txt``).
        test_fraction: for an image ``folder`` without ``test/`` sub-folder: hold out this
            share of each class as the ``test`` split (the kNN monitor's queries) and pretrain
            on the rest (see :func:`build_dataset`). Without it such a folder has no ``test``
            split: set it, or ``val_split: null``.
        split_seed: seed of the held-out split (kept apart from ``seed`` so that runs with
            other shuffling seeds are evaluated on the same images).
        video: clip sampling of the video datasets (``ucf101``, ``hmdb51``, ``kinetics``,
            ``video_folder``; see :mod:`contrastkit.train.video`): training items are
            ``data.video.num_clips`` clips of one video, the kNN monitor sees the centre clip.
            Default :class:`~contrastkit.train.specs.VideoDataSpec` for those datasets.
    """

    def __init__(
        self,
        dataset: DatasetName = "digits",
        root: str | None = None,
        train_split: str = "train",
        bank_split: str = "train",
        val_split: str | None = "test",
        batch_size: int = 256,
        num_workers: int = 0,
        cache_dir: str | None = None,
        image_size: int | None = None,
        load_size: int | None = None,
        classes: list[str] | None = None,
        subset: int | None = None,
        long_tail_ratio: float | None = None,
        monitor_bank_size: int | None = 10000,
        seed: int = 0,
        skip_corrupt: bool = False,
        test_fraction: float | None = None,
        split_seed: int = 0,
        video: VideoDataSpec | None = None,
    ) -> None:
        super().__init__()
        if batch_size < 2:
            raise ValueError(
                f"data.batch_size is {batch_size}: contrastive losses need at least 2 images "
                "per process"
            )
        if num_workers < 0:
            raise ValueError(f"data.num_workers must be >= 0, got {num_workers}")
        self.dataset_name = dataset
        self.root = os.path.expanduser(root) if root else None
        self.train_split, self.bank_split, self.val_split = train_split, bank_split, val_split
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.cache_dir = cache_dir
        self.image_size = image_size
        if load_size is not None and load_size < 1:
            raise ValueError(f"data.load_size must be >= 1, got {load_size}")
        self.load_size = load_size
        self.classes = list(classes) if classes is not None else None
        self.subset = subset
        self.long_tail_ratio = long_tail_ratio
        self.monitor_bank_size = monitor_bank_size
        self.seed = seed
        self.skip_corrupt = skip_corrupt
        if test_fraction is not None and not 0.0 < test_fraction < 1.0:
            raise ValueError(f"data.test_fraction must be between 0 and 1, got {test_fraction}")
        self.test_fraction, self.split_seed = test_fraction, split_seed
        self.skipped: list[str] = []
        from contrastkit.train.video import is_video_dataset

        self.is_video = is_video_dataset(dataset)
        if video is not None and not self.is_video:
            raise ValueError(f"data.video applies to the video datasets, not {dataset!r}")
        if self.is_video:
            for key in ("cache_dir", "image_size", "load_size"):
                if getattr(self, key) is not None:
                    raise ValueError(f"data.{key} applies to image datasets, not {dataset!r}")
        self.video = (video or VideoDataSpec()) if self.is_video else None
        self.train_set: Dataset | None = None
        self.bank_set: Dataset | None = None
        self.val_set: Dataset | None = None

    def _open(self, split: str, monitor: bool = False) -> Dataset:
        if self.is_video:
            from contrastkit.train.video import build_video_dataset

            dataset = build_video_dataset(self.dataset_name, self.root, split, self.video,
                                          role="monitor" if monitor else "train",
                                          skip_corrupt=self.skip_corrupt)
            return select_classes(dataset, self.classes) if self.classes is not None else dataset
        dataset, skipped = open_split(
            self.dataset_name, self.root, split, cache_dir=self.cache_dir,
            image_size=self.image_size, load_size=self.load_size, classes=self.classes,
            skip_corrupt=self.skip_corrupt, test_fraction=self.test_fraction,
            split_seed=self.split_seed)
        self.skipped += [p for p in skipped if p not in self.skipped]
        return dataset

    @property
    def num_classes(self) -> int:
        """Number of classes of the bank split (0 when unlabelled)."""
        self.setup("fit")
        return len(getattr(self.bank_set or self.train_set, "classes", []))

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        train = self._open(self.train_split)
        if self.long_tail_ratio is not None:
            train = datasets.long_tailed(train, self.long_tail_ratio, seed=self.seed)
        if self.subset is not None:
            train = _fixed_subset(train, self.subset, self.seed)
        if len(train) < self.batch_size:
            raise ValueError(
                f"the training split has {len(train)} images, fewer than data.batch_size "
                f"({self.batch_size}): no full batch can be formed"
            )
        self.train_set = train
        if self.val_split is not None and not is_labelled(train):
            rank_zero_info(f"data: {self.root} has no class sub-folders (unlabelled images): "
                           "pretraining without the kNN monitor and the online classifier")
            self.val_split = None
        if self.val_split is not None and self.val_split == self.bank_split:
            rank_zero_info(f"data: the kNN monitor queries its own bank (data.val_split = "
                           f"data.bank_split = {self.val_split}): not a held-out accuracy")
        if self.val_split is not None:
            same = self.bank_split == self.train_split and not self.is_video
            bank = train if same else self._open(self.bank_split, monitor=True)
            if self.monitor_bank_size is not None and len(bank) > self.monitor_bank_size:
                bank = _fixed_subset(bank, self.monitor_bank_size, self.seed)
            self.bank_set = bank
            try:
                self.val_set = self._open(self.val_split, monitor=True)
            except MissingSplitError as err:
                raise MissingSplitError(
                    f"data.val_split {self.val_split}: {err}, so the kNN monitor has no images "
                    "of its own; pass --data.test_fraction 0.2 to hold out a stratified 20% "
                    "(left out of pretraining), or --data.val_split null to pretrain without "
                    "the monitor") from None
        if self.test_fraction is not None:
            rank_zero_info(f"data: {self.root}: pretraining on {len(train)} images, "
                           f"data.test_fraction {self.test_fraction} of each class held out as "
                           f"the test split (data.split_seed {self.split_seed})")

    def _loader(self, dataset: Dataset, sampler: Sampler | None, drop_last: bool) -> DataLoader:
        return DataLoader(dataset, batch_size=self.batch_size, sampler=sampler,
                          num_workers=self.num_workers, drop_last=drop_last,
                          pin_memory=torch.cuda.is_available(),
                          persistent_workers=self.num_workers > 0,
                          collate_fn=None if self.is_video else datasets.collate_images)

    def train_dataloader(self) -> DataLoader:
        assert self.train_set is not None
        trainer = self.trainer
        world = trainer.world_size if trainer is not None else 1
        sampler = EpochShuffleSampler(len(self.train_set), self.seed,
                                      rank=trainer.global_rank if world > 1 else 0,
                                      world_size=world, batch_size=self.batch_size)
        return self._loader(self.train_set, sampler, drop_last=True)

    def val_dataloader(self) -> list[DataLoader]:
        if self.val_set is None or self.bank_set is None:
            return []
        trainer = self.trainer
        shards = trainer.world_size if trainer is not None else 1
        index = trainer.global_rank if trainer is not None else 0
        return [self._loader(split, ShardSampler(len(split), index, shards), False)
                for split in (self.bank_set, self.val_set)]


class ShardSampler(Sampler[int]):
    """Indices ``rank, rank + W, rank + 2W, ...`` of ``range(n)``, in order, without padding.

    The kNN monitor's split is cut into ``W`` disjoint shards (the last ones one item shorter
    when ``W`` does not divide ``n``): unlike ``DistributedSampler`` nothing is repeated, so
    gathering the shards gives back the split exactly (``module._gather_shards``).
    """

    def __init__(self, n: int, rank: int = 0, world_size: int = 1) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must lie in [0, {world_size}), got {rank}")
        self.n, self.rank, self.world_size = n, rank, world_size

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.n, self.world_size))

    def __len__(self) -> int:
        return len(range(self.rank, self.n, self.world_size))


class ResizedSquare(Dataset):
    """Resize each image so its shorter side is ``size`` (antialiased), then centre-crop it
    to ``size`` x ``size``; keeps ``classes`` and ``targets``."""

    def __init__(self, dataset: Dataset, size: int) -> None:
        self.dataset, self.size = dataset, size
        self.classes = getattr(dataset, "classes", [])
        self.targets = getattr(dataset, "targets", [])

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, i: int):
        image, label = self.dataset[i][:2]
        h, w = image.shape[-2:]
        scale = self.size / min(h, w)
        new_h, new_w = max(self.size, round(h * scale)), max(self.size, round(w * scale))
        resized = torch.nn.functional.interpolate(
            image[None].float(), size=(new_h, new_w), mode="bilinear", antialias=True,
            align_corners=False)[0]
        top, left = (new_h - self.size) // 2, (new_w - self.size) // 2
        crop = resized[:, top : top + self.size, left : left + self.size]
        return crop.round().clamp(0, 255).to(torch.uint8), label


class _Relabelled(Dataset):
    """Items of ``dataset`` at ``indices`` with labels mapped through ``mapping``."""

    def __init__(self, dataset: Dataset, indices: list[int], mapping: dict[int, int],
                 classes: list[str]) -> None:
        self.dataset, self.indices, self.mapping = dataset, indices, mapping
        self.classes = classes
        targets = dataset.targets  # type: ignore[attr-defined]
        self.targets = [mapping[int(targets[i])] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int):
        image, label = self.dataset[self.indices[i]][:2]
        return image, self.mapping[int(label)]


def select_classes(dataset: Dataset, classes: list[str]) -> Dataset:
    """Keep the samples of ``classes`` (by name), relabelled ``0..len(classes)-1`` in order.

    Raises:
        ValueError: when a name is not among the dataset's classes, or none is given.
    """
    names = list(getattr(dataset, "classes", []))
    missing = [c for c in classes if c not in names]
    if not classes or missing:
        raise ValueError(f"data.classes: {missing or 'empty list'} not among the dataset's "
                         f"classes {names}")
    mapping = {names.index(c): i for i, c in enumerate(classes)}
    targets = dataset.targets  # type: ignore[attr-defined]
    indices = [i for i, y in enumerate(targets) if int(y) in mapping]
    return _Relabelled(dataset, indices, mapping, list(classes))


def _fixed_subset(dataset: Dataset, n: int, seed: int) -> Subset:
    """The first ``n`` items of a seeded permutation, keeping ``classes`` and ``targets``."""
    if n < 1:
        raise ValueError(f"subset size must be >= 1, got {n}")
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))
    indices = sorted(order[: min(n, len(dataset))].tolist())
    subset = Subset(dataset, indices)
    targets = getattr(dataset, "targets", None)
    subset.classes = getattr(dataset, "classes", [])  # type: ignore[attr-defined]
    subset.targets = [targets[i] for i in indices] if targets is not None else []  # type: ignore[attr-defined]
    return subset
