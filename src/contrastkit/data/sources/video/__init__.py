"""Video datasets: UCF101, HMDB51, Kinetics and folders of videos, with the clip sampling of
SCE 4.2 and D.3 (the videos are read by :mod:`contrastkit.data.decode.video`; their
augmentations are :mod:`contrastkit.data.augment.video`).

Public entry point of the video sources (``from contrastkit.data.sources import video``):

* Clip sampling (:mod:`._clip_sampling`, SCE appendix D.3): :func:`sample_clip_indices`,
  :func:`clip_length`, :func:`eval_clip_starts`, :func:`average_views`, :class:`ThreeCrop`.
* Datasets (:mod:`._datasets`): :class:`UCF101`, :class:`HMDB51`, :class:`Kinetics`
  (also Mini-Kinetics-200), :class:`VideoFolder`, :class:`ClipDataset` and the annotation
  readers ``read_*`` (:mod:`._annotations`).

Typical pretraining pipeline (SCE 4.2.2: two 8-frame clips of 2.56 s, strong-alpha /
strong-beta with colour strength 1.0, RGB difference with probability 0.2)::

    from contrastkit.data.augment import video as clip_augment

    data = video.Kinetics(root, "train.csv", frames=8, num_clips=2, short_side=128,
                          crop_size=128, skip_corrupt=True)
    augment = [clip_augment.video_preset(name, 112, jitter_strength=1.0)
               for name in ("strong_alpha", "strong_beta")]
    diff = clip_augment.RandomRGBDifference(0.2)
    for (clip_a, clip_b), _ in loader:                     # uint8 (B, T, C, H, W)
        view_a = diff(augment[0](clip_a.to(device)))       # float (B, T, C, 112, 112)
        view_b = diff(augment[1](clip_b.to(device)))
"""

from __future__ import annotations

from ._annotations import (
    VIDEO_EXTENSIONS,
    read_hmdb51,
    read_kinetics,
    read_ucf101,
    read_video_folder,
)
from ._clip_sampling import (
    ThreeCrop,
    average_views,
    clip_length,
    eval_clip_starts,
    sample_clip_indices,
)
from ._datasets import HMDB51, UCF101, ClipDataset, Kinetics, VideoFolder

__all__ = [
    "HMDB51",
    "UCF101",
    "VIDEO_EXTENSIONS",
    "ClipDataset",
    "Kinetics",
    "ThreeCrop",
    "VideoFolder",
    "average_views",
    "clip_length",
    "eval_clip_starts",
    "read_hmdb51",
    "read_kinetics",
    "read_ucf101",
    "read_video_folder",
    "sample_clip_indices",
]
