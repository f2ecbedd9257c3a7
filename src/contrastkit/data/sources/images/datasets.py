"""Datasets of contrastkit: real on-disk formats, uint8 images, integer labels.

Every dataset is a ``torch.utils.data.Dataset`` with ``ds[i] -> (image, label)`` where
``image`` is a ``torch.uint8`` tensor ``(C, H, W)`` and ``label`` an ``int`` (``-1`` for
unlabelled samples), ``len(ds)``, ``ds.classes`` (class names) and ``ds.targets`` (labels).
Augmentation happens later, batched on the device (``contrastkit.data.augment``).

Readers:

* :class:`CIFAR10`, :class:`CIFAR100`: official python pickles or their ``.tar.gz``.
* :class:`STL10`: official binary files (memory-mapped).
* :class:`SVHN`: official ``.mat`` files.
* :class:`ImageFolder`, :class:`TinyImageNet`, :class:`ImageNet100`: image files, lazily decoded;
  :func:`open_image_folder` also reads a flat folder of unlabelled images, and :func:`hold_out`
  splits a folder into stratified, seeded ``train`` / ``test`` parts.
* :class:`Digits`: scikit-learn's 8x8 digits, offline.

Helpers: :class:`WithIndex` (adds the sample index), :func:`long_tailed` (imbalanced subsets),
:func:`imagenet100_classes`, and the array cache :mod:`contrastkit.data.sources.images.cache`
(:class:`ArrayCache`, :class:`CachedImages`).
"""

from ._cifar import CIFAR10, CIFAR100
from ._common import UNLABELLED, ArrayImages, WithIndex, files_fingerprint
from ._digits import Digits
from ._download import download, md5_of
from ._folder import (
    ImageFiles,
    ImageFolder,
    check_headers,
    hold_out,
    list_images,
    open_image_folder,
    scan_folder,
)
from ._imagenet import ImageNet100, TinyImageNet, imagenet100_classes
from ._stl10 import STL10
from ._svhn import SVHN
from .cache import ArrayCache, CachedImages
from .longtail import LongTailedSubset, long_tailed, long_tailed_counts

__all__ = [
    "CIFAR10",
    "CIFAR100",
    "STL10",
    "SVHN",
    "UNLABELLED",
    "ArrayCache",
    "ArrayImages",
    "CachedImages",
    "Digits",
    "ImageFiles",
    "ImageFolder",
    "ImageNet100",
    "LongTailedSubset",
    "TinyImageNet",
    "WithIndex",
    "check_headers",
    "download",
    "files_fingerprint",
    "hold_out",
    "imagenet100_classes",
    "list_images",
    "long_tailed",
    "long_tailed_counts",
    "md5_of",
    "open_image_folder",
    "scan_folder",
]
