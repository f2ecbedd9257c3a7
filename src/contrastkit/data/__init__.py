"""Data: datasets in their real on-disk formats (uint8 images), the dataset registry that
pretraining and evaluation share (``registry``: a name and a split -> a dataset; ``wrappers``:
load-size resize, class selection, subsets; ``specs``: the clip sampling record), batched
augmentations on the batch's device, view generators (``views``, ``video_views``) and video
decoding.

``from contrastkit.data import datasets, augment, views, video``; ``registry``, ``wrappers``,
``specs`` and ``video_views`` are imported by name (``from contrastkit.data import registry``).
"""

from contrastkit.data import augment, datasets, views

__all__ = ["augment", "datasets", "views"]
