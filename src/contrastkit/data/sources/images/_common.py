"""Shared building blocks of the dataset readers.

Every dataset of :mod:`contrastkit.data.sources.images.datasets` yields ``(image, label)`` where
``image`` is a ``torch.uint8`` tensor of shape ``(C, H, W)`` and ``label`` an ``int`` (``-1`` when
unlabelled), and exposes ``classes`` (list of class names) and ``targets`` (list of labels).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

UNLABELLED = -1


def is_hidden(name: str) -> bool:
    """Whether a file or folder name is hidden (starts with ``.``: macOS's ``._name.jpg``
    resource forks, thumbnail caches); no reader of a folder or an archive reads it."""
    return name.startswith(".")


def check_split(split: str, allowed: Sequence[str], dataset: str) -> str:
    """Return ``split`` if it is one of ``allowed``, else raise a ``ValueError`` naming it."""
    if split not in allowed:
        raise ValueError(f"{dataset}: split={split!r} is not one of {list(allowed)}")
    return split


def files_fingerprint(paths: Sequence[str | os.PathLike[str]], root: str | os.PathLike[str]) -> str:
    """Hash of the names (relative to ``root``), sizes and modification times of ``paths``.

    Cheap (one ``stat`` per file) and changes whenever a file is added, removed, renamed,
    rewritten or touched.
    """
    h = hashlib.sha256()
    prefix = os.path.join(os.fspath(root), "")
    for p in paths:
        p = os.fspath(p)
        st = os.stat(p)
        rel = p[len(prefix) :] if p.startswith(prefix) else os.path.relpath(p, root)
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


class ArrayImages(Dataset):
    """Images held in one uint8 array (in memory or memory-mapped) with integer labels.

    Args:
        images: array-like of shape ``(N, C, H, W)`` and dtype uint8 supporting integer and
            integer-array indexing (``np.ndarray``, ``np.memmap`` or a lazy view).
        labels: ``(N,)`` integer labels, ``-1`` for unlabelled samples.
        classes: class names; ``labels`` index into it.

    ``ds[i]`` returns ``(torch.uint8 tensor (C, H, W), int)``. ``ds.__getitems__(indices)``
    reads a whole batch with one fancy-indexing call (``torch.utils.data.DataLoader`` uses it
    for batched fetching, then collates), ``ds[indices]`` returns the batch
    ``(images (B, C, H, W), labels (B,))`` directly, and :meth:`batches` iterates over an epoch
    of such batches without a DataLoader.
    """

    def __init__(self, images: Any, labels: Sequence[int] | np.ndarray, classes: Sequence[str]):
        labels = np.asarray(labels, dtype=np.int64)
        if labels.ndim != 1 or len(labels) != len(images):
            raise ValueError(
                f"labels: expected shape ({len(images)},), got {tuple(labels.shape)}"
            )
        if len(images.shape) != 4:
            raise ValueError(f"images: expected shape (N, C, H, W), got {tuple(images.shape)}")
        self.images = images
        self.labels = labels
        self.classes = list(classes)
        self.targets: list[int] = labels.tolist()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: Any) -> Any:
        """``ds[i] -> (image, label)``; ``ds[[i, j, ...]] -> (images, labels)`` batched.

        The batched form lets a ``DataLoader(ds, sampler=BatchSampler(...), batch_size=None)``
        fetch a whole batch with one fancy-indexing read and no collate step.
        """
        if np.ndim(index) == 1:
            return self.get_batch(np.asarray(index))
        index = int(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} samples")
        image = np.array(self.images[index], dtype=np.uint8, order="C", copy=True)
        return torch.from_numpy(image), int(self.labels[index])

    def get_batch(self, indices: Sequence[int] | np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Images ``(B, C, H, W)`` uint8 and labels ``(B,)`` int64 for ``indices``, in order."""
        idx = np.asarray(indices, dtype=np.int64)
        images = np.asarray(self.images[idx], dtype=np.uint8)  # fancy indexing copies
        return torch.from_numpy(np.ascontiguousarray(images)), torch.from_numpy(self.labels[idx])

    def __getitems__(self, indices: Sequence[int]) -> list[tuple[torch.Tensor, int]]:
        images, labels = self.get_batch(indices)
        return list(zip(images.unbind(0), labels.tolist(), strict=True))

    def batches(
        self,
        batch_size: int,
        shuffle: bool = False,
        generator: torch.Generator | None = None,
        drop_last: bool = False,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Iterate over one epoch in batches, without a DataLoader.

        Args:
            batch_size: samples per batch (the last one may be smaller unless ``drop_last``).
            shuffle: visit samples in the order of ``torch.randperm(len, generator=generator)``.
            generator: random generator for the permutation (reproducible epochs).
            drop_last: drop the last incomplete batch.

        Yields:
            ``(images uint8 (B, C, H, W), labels int64 (B,))``.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        n = len(self)
        if shuffle:
            order = torch.randperm(n, generator=generator).numpy()
        else:
            order = np.arange(n)
        stop = n - n % batch_size if drop_last else n
        for start in range(0, stop, batch_size):
            idx = order[start : start + batch_size]
            if not shuffle:
                yield self._slice(int(idx[0]), int(idx[-1]) + 1)
            else:
                yield self.get_batch(idx)

    def _slice(self, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        images = np.array(self.images[start:stop], dtype=np.uint8, order="C", copy=True)
        return torch.from_numpy(images), torch.from_numpy(self.labels[start:stop].copy())


class WithIndex(Dataset):
    """Wrap a dataset so that ``ds[i]`` returns ``(image, label, i)``.

    For methods that need the sample index (memory banks, per-sample statistics).
    ``classes`` and ``targets`` are forwarded from the wrapped dataset.
    """

    def __init__(self, dataset: Any):
        self.dataset = dataset

    @property
    def classes(self) -> list[str]:
        return self.dataset.classes

    @property
    def targets(self) -> list[int]:
        return self.dataset.targets

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int, int]:
        image, label = self.dataset[index]
        return image, label, int(index)

    def __getitems__(self, indices: Sequence[int]) -> list[tuple[torch.Tensor, int, int]]:
        get_many = getattr(self.dataset, "__getitems__", None)
        pairs = get_many(indices) if get_many else [self.dataset[i] for i in indices]
        return [(img, lab, int(i)) for (img, lab), i in zip(pairs, indices, strict=True)]
