"""Long-tailed (exponentially imbalanced) subsets of a labelled dataset.

The profile of Cui et al. (2019), used for CIFAR-10/100-LT by DySTreSS (Manna et al.):
class ``c`` (``c = 0 .. C-1`` in class-index order) keeps

    n_c = floor(n_max * ratio ** (c / (C - 1)))

images, where ``n_max`` is the size of the largest class and ``ratio = n_{C-1} / n_0`` is the
imbalance ratio (e.g. 0.01 gives 5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50 on CIFAR-10).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset


def long_tailed_counts(n_max: int, n_classes: int, ratio: float) -> list[int]:
    """``floor(n_max * ratio ** (c / (C - 1)))`` for ``c = 0 .. C-1`` (``[n_max]`` if C == 1).

    A relative tolerance of 1e-9 is added before flooring so that exact products (e.g.
    ``5000 * 0.01 = 50``) are not lost to floating-point rounding.
    """
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"ratio must be in (0, 1], got {ratio}")
    if n_classes == 1:
        return [n_max]
    return [
        math.floor(n_max * ratio ** (c / (n_classes - 1)) * (1 + 1e-9)) for c in range(n_classes)
    ]


class LongTailedSubset(Dataset):
    """A subset of ``dataset`` given by ``indices``, with ``classes`` and ``targets``.

    Args:
        dataset: the full dataset (``ds[i] -> (image, label)``).
        indices: kept sample indices of ``dataset``, in dataset order.
        classes: class names (those of ``dataset``).
        targets: labels of the kept samples.
    """

    def __init__(self, dataset: Any, indices: Sequence[int], classes: Sequence[str],
                 targets: Sequence[int]):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]
        self.classes = list(classes)
        self.targets = [int(t) for t in targets]

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.dataset[self.indices[index]]

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        mapped = [self.indices[i] for i in indices]
        get_many = getattr(self.dataset, "__getitems__", None)
        return get_many(mapped) if get_many else [self.dataset[i] for i in mapped]


def long_tailed(dataset: Any, ratio: float, seed: int | None = 0) -> LongTailedSubset:
    """Long-tailed subset of a labelled dataset (profile in the module docstring).

    Args:
        dataset: a dataset with ``targets`` (labels ``0..C-1``, ``C = len(dataset.classes)``).
        ratio: imbalance ratio ``n_{C-1} / n_0`` in ``(0, 1]``; 1 keeps ``n_max`` per class.
        seed: which images of class ``c`` are kept: a uniformly random ``n_c`` of them drawn
            with ``numpy.random.default_rng(seed)`` (deterministic for a given seed), or the
            first ``n_c`` in dataset order when ``seed`` is ``None``. Kept indices are returned
            in dataset order. A class with fewer than ``n_c`` images keeps all of them.

    Returns:
        :class:`LongTailedSubset` with the original ``classes`` and the kept ``targets``.

    Raises:
        ValueError: ``ratio`` outside ``(0, 1]``, or unlabelled (``-1``) / out-of-range labels.
    """
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"ratio must be in (0, 1], got {ratio}")
    targets = np.asarray(dataset.targets, dtype=np.int64)
    classes = list(dataset.classes)
    if len(targets) and (targets.min() < 0 or targets.max() >= len(classes)):
        raise ValueError(
            f"dataset: long_tailed needs labels in [0, {len(classes)}) (no unlabelled -1)"
        )
    members = [np.flatnonzero(targets == c) for c in range(len(classes))]
    n_max = max((len(m) for m in members), default=0)
    counts = long_tailed_counts(n_max, len(classes), ratio)
    rng = np.random.default_rng(seed) if seed is not None else None
    kept = []
    for idx, n_c in zip(members, counts, strict=True):
        n_c = min(n_c, len(idx))
        kept.append(idx[:n_c] if rng is None else rng.choice(idx, size=n_c, replace=False))
    indices = np.sort(np.concatenate(kept)) if kept else np.zeros(0, dtype=np.int64)
    return LongTailedSubset(dataset, indices.tolist(), classes, targets[indices].tolist())
