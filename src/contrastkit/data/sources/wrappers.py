"""Datasets around datasets: the load-size resize, the class selection, fixed subsets and the
kNN monitor's centre clip. Each keeps the ``classes`` and ``targets`` of what it wraps (those
of the kept samples), so wrappers stack.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.data import Dataset, Subset

__all__ = ["CentreClip", "ResizedSquare", "fixed_subset", "resize_square", "select_classes"]


class ResizedSquare(Dataset):
    """Resize each image so its shorter side is ``size`` (antialiased), then centre-crop it
    to ``size`` x ``size``; keeps ``classes`` and ``targets``.

    A dataset with ``read_at_least(i, side)`` (image files) is asked for its image already
    reduced by the largest integer factor that keeps the shorter side at least ``size``
    (JPEGs decoded at a DCT scale of 1/2, 1/4 or 1/8, other formats box-averaged right after
    decoding), so a 10000 x 10000 file is never held at full size in float32."""

    def __init__(self, dataset: Dataset, size: int) -> None:
        self.dataset, self.size = dataset, size
        self.classes = getattr(dataset, "classes", [])
        self.targets = getattr(dataset, "targets", [])

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, i: int):
        read = getattr(self.dataset, "read_at_least", None)  # image files: reduced decode
        image, label = read(i, self.size) if callable(read) else self.dataset[i][:2]
        return resize_square(image, self.size), label


def resize_square(image: torch.Tensor, size: int) -> torch.Tensor:
    """A uint8 ``(3, H, W)`` image with its shorter side resized to ``size`` (antialiased
    bilinear), centre-cropped to ``size`` x ``size``."""
    h, w = image.shape[-2:]
    scale = size / min(h, w)
    new_h, new_w = max(size, round(h * scale)), max(size, round(w * scale))
    resized = torch.nn.functional.interpolate(
        image[None].float(), size=(new_h, new_w), mode="bilinear", antialias=True,
        align_corners=False)[0]
    top, left = (new_h - size) // 2, (new_w - size) // 2
    crop = resized[:, top : top + size, left : left + size]
    return crop.round().clamp(0, 255).to(torch.uint8)


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


def fixed_subset(dataset: Dataset, n: int, seed: int, start: int = 0) -> Subset:
    """The ``n`` items from position ``start`` of a seeded permutation (the first ``n`` by
    default), keeping ``classes`` and ``targets``: ``start = n`` of one call gives the items
    that follow another call's first ``n``, never the same."""
    if n < 1:
        raise ValueError(f"subset size must be >= 1, got {n}")
    if start < 0:
        raise ValueError(f"subset start must be >= 0, got {start}")
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))
    indices = sorted(order[start: min(start + n, len(dataset))].tolist())
    subset = Subset(dataset, indices)
    targets = getattr(dataset, "targets", None)
    subset.classes = getattr(dataset, "classes", [])  # type: ignore[attr-defined]
    subset.targets = [targets[i] for i in indices] if targets is not None else []  # type: ignore[attr-defined]
    return subset


class CentreClip(Dataset):
    """The middle one of the 3 spatial crops of a 1-clip ``mode="eval"`` dataset.

    With ``eval_clips=1`` the clip is the centre clip of the video, so an item is the centre
    clip, centre square crop, uint8 ``(T, C, S, S)``: the kNN monitor's single view.
    """

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        self.classes = list(getattr(dataset, "classes", []))
        self.targets = list(getattr(dataset, "targets", []))

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> tuple[Tensor, int]:
        views, label = self.dataset[i]
        return views[views.shape[0] // 2], label
