"""Data, in sub-packages by job:

* ``images``: image data sets in their real on-disk formats, decoded to uint8 (``images.datasets``
  lists them), long-tailed subsets and the checksummed uint8 array cache;
* ``video``: video decoding, clip sampling, the video data sets, clip augmentations and views;
* ``augment``: batched image augmentations on the batch's device (SCE Table 1, SimCLR, the
  evaluation transforms);

and beside them the view generators (``views``: a uint8 batch -> the augmented views of a
method), the dataset registry that pretraining and evaluation share (``registry``: a name and a
split -> a dataset), ``wrappers`` (load-size resize, class selection, subsets) and ``specs``
(the clip sampling record).

``from contrastkit.data import augment, datasets, views``; the rest by name
(``from contrastkit.data import registry``, ``from contrastkit.data import video``).
"""

from contrastkit.data import augment, views
from contrastkit.data.images import datasets

__all__ = ["augment", "datasets", "views"]
