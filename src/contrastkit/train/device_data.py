"""A small training split kept on the device: batches gathered there, without loader workers
(``data.on_device``).

CIFAR-10's 50,000 training images are 150 MiB as uint8: they fit on any GPU many times over,
and reading them there costs one gather per batch instead of a worker's stacking, pinning and
host-to-device copy. :class:`DeviceBatches` reads the split once, in order, through the same
loader the ordinary path uses (decoding, resizing and collation unchanged), keeps images and
labels as two tensors on the device, and at every epoch cuts the order of the data module's
:class:`~contrastkit.train.datamodule.EpochShuffleSampler` into batches (the last partial one
dropped): the same batches, rows in the same order, as the loader gives for the same seed and
epoch, also after a resume (Lightning calls ``set_epoch`` on :attr:`DeviceBatches.sampler` as on
a loader's). The order itself is drawn on the host (one ``randperm`` of 50,000 per epoch, as the
loader's sampler draws it) and copied to the device once per epoch.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler

from contrastkit.data.decode import images as decode

__all__ = ["DEFAULT_MAX_BYTES", "DeviceBatches"]

#: The largest split kept on the device unless told otherwise (uint8 images and labels).
DEFAULT_MAX_BYTES = 1 << 30


class DeviceBatches:
    """The training batches of ``dataset`` in ``sampler``'s order, gathered on ``device``.

    Args:
        dataset: the training split, items ``(uint8 image, label)`` of one shape.
        sampler: the data module's sampler (its order per epoch and process; Lightning sets
            its epoch).
        batch_size: images per batch (per process).
        device: where the split is kept.
        max_bytes: refuse a split larger than this.

    Raises:
        ValueError: for a split larger than ``max_bytes`` or images that are not uint8 tensors.
    """

    def __init__(self, dataset: Dataset, sampler: Sampler[int], batch_size: int,
                 device: torch.device, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.sampler, self.batch_size, self.device = sampler, batch_size, device
        images, labels = dataset[0][0], dataset[0][1]
        if not isinstance(images, Tensor) or images.dtype != torch.uint8:
            raise ValueError("data.on_device keeps uint8 image tensors on the device; this "
                             f"dataset gives {type(images).__name__} items")
        n = len(dataset)  # type: ignore[arg-type]
        size = n * (images.numel() + torch.as_tensor(labels).element_size())
        if size > max_bytes:
            raise ValueError(f"data.on_device: the training split takes {size / 2**30:.2f} GiB "
                             f"as uint8, more than {max_bytes / 2**30:.2f} GiB: set "
                             "data.on_device false (the loader reads it)")
        self.images = torch.empty((n, *images.shape), dtype=torch.uint8, device=device)
        self.labels: Tensor | None = None
        start = 0
        for batch in DataLoader(dataset, batch_size=1024, shuffle=False,
                                collate_fn=decode.collate_images):
            rows = slice(start, start + batch[0].shape[0])
            self.images[rows] = batch[0].to(device)
            if self.labels is None:
                self.labels = torch.empty(n, dtype=batch[1].dtype, device=device)
            self.labels[rows] = batch[1].to(device)
            start = rows.stop

    def __len__(self) -> int:
        return len(self.sampler) // self.batch_size  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        order = torch.tensor(list(iter(self.sampler)), dtype=torch.int64)
        order = order[: len(self) * self.batch_size].to(self.device, non_blocking=True)
        for rows in order.view(len(self), self.batch_size):
            yield self.images.index_select(0, rows), self.labels.index_select(0, rows)
