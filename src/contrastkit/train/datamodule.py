"""Lightning data module for pretraining: uint8 batches, augmentation happens on the device.

The datasets come from the registry (:mod:`contrastkit.data.sources.registry`, shared with
evaluation); this module adds what only training needs: the samplers, the subsets of a study
and the loaders.

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
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from typing import Literal

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import DataLoader, Dataset, Sampler

from contrastkit.data.decode import images as decode
from contrastkit.data.loading.crops import (
    CropSpec,
    EpochKeys,
    LoaderCrops,
    ViewCrops,
    encoded_reader,
)
from contrastkit.data.sources.images import datasets
from contrastkit.data.sources.registry import (
    DatasetName,
    MissingSplitError,
    build_video_dataset,
    files_not_read,
    is_labelled,
    is_video_dataset,
    not_read_line,
    open_split,
)
from contrastkit.data.sources.stream import DecodedImage, ShardStream, is_url
from contrastkit.data.sources.wrappers import ResizedSquare, fixed_subset, select_classes
from contrastkit.data.specs import VideoDataSpec
from contrastkit.train.device_data import DeviceBatches


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

    @classmethod
    def for_trainer(cls, trainer: L.Trainer | None, n: int, seed: int,
                    batch_size: int) -> EpochShuffleSampler:
        """The sampler of this process of ``trainer``'s run (one process without a trainer)."""
        world = trainer.world_size if trainer is not None else 1
        return cls(n, seed, rank=trainer.global_rank if world > 1 else 0, world_size=world,
                   batch_size=batch_size)

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


class PretrainDataModule(L.LightningDataModule):
    """Datasets and loaders for pretraining and the online kNN monitor.

    Args:
        dataset: dataset name (:data:`DatasetName`); ``digits`` needs no files.
        root: dataset folder or archive.
        train_split: split used for pretraining (e.g. ``train+unlabeled`` for STL-10).
        bank_split: labelled split for the kNN bank (default: ``train``).
        val_split: split whose kNN accuracy is monitored (``None``: no monitor).
        batch_size: images per process per step (>= 2).
        num_workers: loader processes per training process; ``auto``: the CPU cores this
            process may use (``os.sched_getaffinity``) divided by the devices of this machine
            (``trainer.num_devices``), less one for the training process itself, at least 1.
        cache_dir: folder of the uint8 array cache for file datasets.
        image_size: resize file images to this size when caching.
        load_size: resize each decoded image in the loader workers so its shorter side is
            ``load_size``, then centre-crop it to ``load_size`` x ``load_size`` (for folders
            of images of different sizes, e.g. ImageNet with 256: the views' random crops are
            then taken within that centre square, an approximation of cropping the full image).
            With ``crops: loader`` it applies to the kNN monitor's splits only.
        crops: where the views' random resized crops are cut. ``device`` (default): from the
            decoded (and ``load_size``-resized) batch, on the device. ``loader``: from each
            full image in the loader workers, one box per view drawn from the image's own
            size (SCE Table 1, DySTreSS: the papers' crops), JPEGs decoded at a reduced DCT
            scale when every box allows it, crops resized in uint8
            (:mod:`contrastkit.data.loading.crops`); flips and colour steps stay on the
            device. For image files (``folder``, ``imagenet100``, ``tinyimagenet``) or
            ``shards`` of any sizes; not with ``cache_dir``. ``dali``: the same boxes, each
            decoded alone by NVIDIA DALI, on the GPU when training on one (nvJPEG), else in
            ``num_workers`` DALI CPU threads (:mod:`contrastkit.data.loading.dali_crops`; needs
            ``contrastkit[dali]``; not with ``stream``).
        fast_decode: with ``crops: loader``, decode JPEGs with libjpeg's fast inverse DCT
            (``simplejpeg``'s ``fastdct``): a cheaper decode whose pixels differ from the
            accurate one by about 1 grey level on average (``benchmarks/README.md``,
            "Loader crops"). Off by default.
        stream: with ``dataset: shards``, stream the training split's shards sequentially
            through webdataset (:mod:`contrastkit.data.sources.stream`: shard order drawn per epoch,
            shards split across processes then workers, a bounded shuffle buffer) instead of
            reading them by random access; ``root`` may then be a URL prefix webdataset
            opens (``https://``, ``pipe:``...; the kNN monitor still reads its splits by
            random access, so with a URL set ``val_split: null``). Off by default.
        shuffle_buffer: samples in each loader worker's shuffle buffer with ``stream``.
        on_device: keep the training split on the training device (at most 1 GiB of uint8
            images of one size, e.g. CIFAR) and gather every batch there, without loader
            workers: the same batches in the same order (:mod:`contrastkit.train.device_data`).
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
            on the rest (see :func:`contrastkit.data.sources.registry.build_dataset`). Without it
            such a folder has no ``test`` split: set it, or ``val_split: null``.
        split_seed: seed of the held-out split (kept apart from ``seed`` so that runs with
            other shuffling seeds are evaluated on the same images).
        video: clip sampling of the video datasets (``ucf101``, ``hmdb51``, ``kinetics``,
            ``video_folder``; see :func:`contrastkit.data.sources.registry.build_video_dataset`):
            training items are ``data.video.num_clips`` clips of one video, the kNN monitor
            sees the centre clip.
            Default :class:`~contrastkit.data.specs.VideoDataSpec` for those datasets.
    """

    def __init__(
        self,
        dataset: DatasetName = "digits",
        root: str | None = None,
        train_split: str = "train",
        bank_split: str = "train",
        val_split: str | None = "test",
        batch_size: int = 256,
        num_workers: int | Literal["auto"] = 0,
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
        crops: Literal["device", "loader", "dali"] = "device",
        fast_decode: bool = False,
        stream: bool = False,
        shuffle_buffer: int = 1000,
        on_device: bool = False,
    ) -> None:
        super().__init__()
        if batch_size < 2:
            raise ValueError(
                f"data.batch_size is {batch_size}: contrastive losses need at least 2 images "
                "per process"
            )
        if num_workers != "auto" and (not isinstance(num_workers, int) or num_workers < 0):
            raise ValueError(f"data.num_workers must be an int >= 0 or 'auto', got "
                             f"{num_workers!r}")
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
        #: files of the image folders read that are not images it reads (counted at the start)
        self.not_read: list[str] = []
        self.is_video = is_video_dataset(dataset)
        if video is not None and not self.is_video:
            raise ValueError(f"data.video applies to the video datasets, not {dataset!r}")
        if self.is_video:
            for key in ("cache_dir", "image_size", "load_size"):
                if getattr(self, key) is not None:
                    raise ValueError(f"data.{key} applies to image datasets, not {dataset!r}")
        self.video = (video or VideoDataSpec()) if self.is_video else None
        if crops not in ("device", "loader", "dali"):
            raise ValueError(f"data.crops must be 'device', 'loader' or 'dali', got {crops!r}")
        if crops != "device" and (self.is_video or cache_dir is not None):
            raise ValueError(f"data.crops: {crops} cuts crops from image files; it applies to "
                             "image datasets without data.cache_dir")
        if crops == "dali" and stream:
            raise ValueError("data.crops: dali reads files by random access, not data.stream")
        if fast_decode and crops != "loader":
            raise ValueError("data.fast_decode applies to data.crops: loader")
        self.crops, self.fast_decode = crops, bool(fast_decode)
        self._check_stream(stream, shuffle_buffer)
        self.stream, self.shuffle_buffer = bool(stream), int(shuffle_buffer)
        if on_device and (self.is_video or self.stream or crops != "device"):
            raise ValueError("data.on_device keeps decoded images on the device: not with "
                             "video, data.stream or data.crops: loader / dali")
        self.on_device = bool(on_device)
        #: the views' crops, derived from the views config by
        #: :func:`~contrastkit.data.augment.views.loader_crop_specs` (``contrastkit pretrain``
        #: sets them before training)
        self.crop_specs: list[CropSpec] | None = None
        self.train_set: Dataset | None = None
        self.bank_set: Dataset | None = None
        self.val_set: Dataset | None = None

    def _check_stream(self, stream: bool, shuffle_buffer: int) -> None:
        if not isinstance(shuffle_buffer, int) or shuffle_buffer < 1:
            raise ValueError(f"data.shuffle_buffer must be an int >= 1, got {shuffle_buffer!r}")
        if not stream:
            return
        if self.dataset_name != "shards":
            raise ValueError(f"data.stream reads packed shards: set data.dataset: shards, not "
                             f"{self.dataset_name!r}")
        for key in ("classes", "subset", "long_tail_ratio"):
            if getattr(self, key) is not None:
                raise ValueError(f"data.{key} selects images by index: not with data.stream "
                                 "(pack the selection instead)")
        if self.root is not None and is_url(self.root) and self.val_split is not None:
            raise ValueError(f"data.root {self.root} is a URL: the kNN monitor reads its splits "
                             "by random access from a local folder; set data.val_split: null")

    def _open(self, split: str, monitor: bool = False) -> Dataset:
        if self.is_video:
            dataset = build_video_dataset(self.dataset_name, self.root, split, self.video,
                                          role="monitor" if monitor else "train",
                                          skip_corrupt=self.skip_corrupt)
            return select_classes(dataset, self.classes) if self.classes is not None else dataset
        if self.stream and not monitor:
            return ShardStream(self.root, split)  # type: ignore[arg-type]
        full_images = self.crops != "device" and not monitor
        dataset, skipped = open_split(
            self.dataset_name, self.root, split, cache_dir=self.cache_dir,
            image_size=self.image_size, load_size=None if full_images else self.load_size,
            classes=self.classes, skip_corrupt=self.skip_corrupt,
            test_fraction=self.test_fraction, split_seed=self.split_seed,
            any_size=full_images)
        self.skipped += [p for p in skipped if p not in self.skipped]
        self.not_read += [p for p in files_not_read(dataset) if p not in self.not_read]
        return dataset

    @property
    def num_classes(self) -> int:
        """Number of classes of the bank split (0 when unlabelled)."""
        self.setup("fit")
        return len(getattr(self.bank_set or self.train_set, "classes", []))

    def evaluation_record(self) -> dict:
        """What evaluating a checkpoint of this run needs to know about its data (stored in
        every checkpoint, see :mod:`contrastkit.checkpoints`): the dataset, the names of the
        classes in label order, the held-out split and the load size (defaults of
        ``contrastkit eval`` on the same dataset) and the clip sampling of video datasets."""
        classes = getattr(self.bank_set or self.train_set, "classes", [])
        return {"dataset": self.dataset_name, "classes": [str(c) for c in classes],
                "test_fraction": self.test_fraction, "split_seed": self.split_seed,
                "load_size": self.load_size,
                "video": asdict(self.video) if self.video is not None else None}

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        train = self._open(self.train_split)
        if self.test_fraction is not None and not is_labelled(train):
            # nothing to hold out for: no labels, so no monitor and no evaluation of the split
            self.test_fraction = None
            train = self._open(self.train_split)
            rank_zero_info(f"data: {self.root} has no class sub-folders (unlabelled images): "
                           f"pretraining on all {len(train)} of them, none held out "
                           "(data.test_fraction applies to labelled folders), without the kNN "
                           "monitor and the online classifier")
            self.val_split = None
        classes = getattr(train, "classes", [])
        if len(classes) == 1:
            raise ValueError(
                f"data.root {self.root} has one class sub-folder ({classes[0]}): a labelled "
                "folder needs at least 2 classes (put the images directly in data.root to "
                "pretrain on them as unlabelled images)")
        if self.long_tail_ratio is not None:
            train = datasets.long_tailed(train, self.long_tail_ratio, seed=self.seed)
        if self.subset is not None:
            train = fixed_subset(train, self.subset, self.seed)
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
            if self.bank_split != self.train_split or self.is_video or self.stream:
                bank = self._open(self.bank_split, monitor=True)
            elif self.crops != "device" and self.load_size is not None:
                bank = ResizedSquare(train, self.load_size)  # the training images, as squares
            else:
                bank = train
            if self.monitor_bank_size is not None and len(bank) > self.monitor_bank_size:
                bank = fixed_subset(bank, self.monitor_bank_size, self.seed)
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
            self._say_held_out(len(train))
        line = not_read_line(self.root, self.not_read)
        if line is not None:
            rank_zero_info(line)

    def _say_held_out(self, trained: int) -> None:
        """The start line: how many images the held-out split really holds (none when every
        class has one image); the monitor, which would query an empty split, is then off."""
        held = len(self.val_set if self.val_split == "test" else self._open("test"))  # type: ignore[arg-type]
        none = "" if held else ("; without the kNN monitor and the online classifier (nothing to "
                                "query)" if self.val_split == "test" else "")
        if not held and self.val_split == "test":
            self.val_split, self.val_set, self.bank_set = None, None, None
        rank_zero_info(f"data: {self.root}: pretraining on {trained} images, " + (
            f"{held} held out as the test split (data.test_fraction {self.test_fraction} of "
            f"each class, data.split_seed {self.split_seed})" if held else
            f"none held out: data.test_fraction {self.test_fraction} holds out none of a class "
            f"of one image (a class needs 2 to be in both splits), and every class here has "
            f"one{none}"))

    def workers(self) -> int:
        """``num_workers``, with ``auto`` resolved for this machine (see the class doc)."""
        if self.num_workers != "auto":
            return int(self.num_workers)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)
        devices = max(1, int(getattr(self.trainer, "num_devices", 1) or 1))
        return max(1, cores // devices - 1)

    def _loader(self, dataset: Dataset, sampler: Sampler | None, drop_last: bool) -> DataLoader:
        workers = self.workers()
        return DataLoader(dataset, batch_size=self.batch_size, sampler=sampler,
                          num_workers=workers, drop_last=drop_last,
                          pin_memory=torch.cuda.is_available(),
                          persistent_workers=workers > 0,
                          collate_fn=None if self.is_video else decode.collate_images)

    def train_dataloader(self) -> Iterable:
        assert self.train_set is not None
        if isinstance(self.train_set, ShardStream):
            return self._stream_loader(self.train_set)
        sampler = EpochShuffleSampler.for_trainer(self.trainer, len(self.train_set), self.seed,
                                                  self.batch_size)
        # Lightning starts the loader's iterator (and workers prefetch from the sampler) before
        # it calls set_epoch: a resumed run would otherwise replay epoch 0's order first
        sampler.set_epoch(self._first_epoch())
        if self.crops == "loader":
            crops = LoaderCrops(encoded_reader(self.train_set), self._crop_specs(), self.seed,
                                self.fast_decode)
            return self._loader(crops, EpochKeys(sampler), drop_last=True)
        if self.crops == "dali":
            from contrastkit.data.loading.dali_crops import DaliCrops

            device = self.trainer.strategy.root_device
            return DaliCrops(encoded_reader(self.train_set), self._crop_specs(),
                             EpochKeys(sampler), self.batch_size, self.seed,
                             "gpu" if device.type == "cuda" else "cpu", device.index or 0,
                             max(1, self.workers()))
        if self.on_device:
            device = self.trainer.strategy.root_device if self.trainer else torch.device("cpu")
            return DeviceBatches(self.train_set, sampler, self.batch_size, device)
        return self._loader(self.train_set, sampler, drop_last=True)

    def _first_epoch(self) -> int:
        """The epoch the loader built now serves first: Lightning's processed epoch count (the
        value it gives ``set_epoch``), which a checkpoint written at an epoch end already
        holds, while ``current_epoch`` (the completed count) lags by one until the loop runs."""
        loop = getattr(self.trainer, "fit_loop", None)
        if loop is not None:
            return int(loop.epoch_progress.current.processed)
        return int(getattr(self.trainer, "current_epoch", 0) or 0)

    def _stream_loader(self, stream: ShardStream) -> DataLoader:
        trainer = self.trainer
        world = trainer.world_size if trainer is not None else 1
        rank = trainer.global_rank if world > 1 else 0
        transform = (ViewCrops(self._crop_specs(), self.seed, self.fast_decode)
                     if self.crops == "loader" else DecodedImage(self.load_size))
        share = stream.for_process(rank, world, self.batch_size, transform, self.seed,
                                   self.shuffle_buffer, self._first_epoch())
        return self._loader(share, None, drop_last=True)

    def _crop_specs(self) -> list[CropSpec]:
        if self.crop_specs is None:
            raise ValueError(f"data.crops: {self.crops} needs the views' crops: set crop_specs to "
                             "contrastkit.data.augment.views.loader_crop_specs(views, "
                             "method.default_views) (contrastkit pretrain does)")
        return self.crop_specs

    def val_dataloader(self) -> list[DataLoader]:
        """The loaders of the splits the trained module's online monitors read, in its order
        (:meth:`~contrastkit.train.module.PretrainModule.monitor_splits`: the bank and the
        queries for the kNN monitor, the queries alone for the online classifier); none when
        no monitor runs, so that Lightning runs no validation pass at all. A module that does
        not say gets both."""
        if self.val_set is None or self.bank_set is None:
            return []
        trainer = self.trainer
        module = getattr(trainer, "lightning_module", None)
        wanted = module.monitor_splits() if hasattr(module, "monitor_splits") else (
            "bank", "queries")
        splits = {"bank": self.bank_set, "queries": self.val_set}
        shards = trainer.world_size if trainer is not None else 1
        index = trainer.global_rank if trainer is not None else 0
        return [self._loader(splits[name], ShardSampler(len(splits[name]), index, shards), False)
                for name in wanted]


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
