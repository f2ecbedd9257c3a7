"""Data: datasets in their real on-disk formats (uint8 images), batched augmentations on the
batch's device, view generators and video decoding.

``from contrastkit.data import datasets, augment, views, video``.
"""

from contrastkit.data import augment, datasets, views

__all__ = ["augment", "datasets", "views"]
