"""Video data: PyAV decoding, clip sampling, datasets and video augmentations (SCE 4.2, D.3).

Public entry point of the video data layer (``from contrastkit.data import video``):

* Decoding (:mod:`._decode`): :class:`VideoReader`, :func:`decode_frames`,
  :func:`probe_video`, :class:`VideoInfo`, :class:`VideoDecodeError`. PyAV is the optional
  extra ``video`` (``pip install contrastkit[video]``).
* Clip sampling (:mod:`._clip_sampling`, SCE appendix D.3): :func:`sample_clip_indices`,
  :func:`clip_length`, :func:`eval_clip_starts`, :func:`average_views`.
* Datasets (:mod:`._datasets`): :class:`UCF101`, :class:`HMDB51`, :class:`Kinetics`
  (also Mini-Kinetics-200), :class:`VideoFolder`, :class:`ClipDataset` and the annotation
  readers ``read_*``.
* Augmentations (:mod:`.augment`): :func:`rgb_difference`, :class:`RandomRGBDifference`
  (SCE 4.2.1), :class:`ThreeCrop`, :class:`VideoAugment`, :func:`video_preset`.

Typical pretraining pipeline (SCE 4.2.2: two 8-frame clips of 2.56 s, strong-alpha /
strong-beta with colour strength 1.0, RGB difference with probability 0.2)::

    data = video.Kinetics(root, "train.csv", frames=8, num_clips=2, short_side=128,
                          crop_size=128, skip_corrupt=True)
    augment = [video.video_preset(name, 112, jitter_strength=1.0)
               for name in ("strong_alpha", "strong_beta")]
    diff = video.RandomRGBDifference(0.2)
    for (clip_a, clip_b), _ in loader:                     # uint8 (B, T, C, H, W)
        view_a = diff(augment[0](clip_a.to(device)))       # float (B, T, C, 112, 112)
        view_b = diff(augment[1](clip_b.to(device)))
"""

from __future__ import annotations

from ._clip_sampling import average_views, clip_length, eval_clip_starts, sample_clip_indices
from ._datasets import (
    HMDB51,
    UCF101,
    VIDEO_EXTENSIONS,
    ClipDataset,
    Kinetics,
    VideoFolder,
    read_hmdb51,
    read_kinetics,
    read_ucf101,
    read_video_folder,
)
from ._decode import (
    VideoDecodeError,
    VideoInfo,
    VideoReader,
    decode_frames,
    probe_video,
    resized_size,
)
from .augment import (
    LUMA_WEIGHTS,
    RandomRGBDifference,
    ThreeCrop,
    VideoAugment,
    rgb_difference,
    video_preset,
)

__all__ = [
    "HMDB51",
    "LUMA_WEIGHTS",
    "UCF101",
    "VIDEO_EXTENSIONS",
    "ClipDataset",
    "Kinetics",
    "RandomRGBDifference",
    "ThreeCrop",
    "VideoAugment",
    "VideoDecodeError",
    "VideoFolder",
    "VideoInfo",
    "VideoReader",
    "average_views",
    "clip_length",
    "decode_frames",
    "eval_clip_starts",
    "probe_video",
    "read_hmdb51",
    "read_kinetics",
    "read_ucf101",
    "read_video_folder",
    "resized_size",
    "rgb_difference",
    "sample_clip_indices",
    "video_preset",
]
