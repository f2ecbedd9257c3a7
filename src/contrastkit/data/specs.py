"""Configuration records of the data layer (validated by jsonargparse from YAML, see ``views``
and ``data.video`` in ``docs/configs.md``): how clips are sampled and how the views are made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["MultiCropSpec", "VideoDataSpec", "VideoViewsSpec", "ViewsSpec"]


@dataclass(frozen=True)
class VideoDataSpec:
    """Clip sampling and decoding of the video datasets (SCE, Denize et al. 2023, appendix D.3).

    Attributes:
        annotations: split files: UCF101's ``ucfTrainTestlist`` folder, HMDB51's
            ``testTrainMulti_7030_splits`` folder, or for Kinetics a folder of ``<split>.csv``
            files, a CSV path containing ``{split}``, or one CSV filtered on its ``split``
            column. Not used by ``video_folder``.
        fold: official split 1, 2 or 3 of UCF101 / HMDB51.
        frames: frames kept per clip (8 or 16 in SCE).
        duration_s: clip duration in seconds (2.56 s: 64 frames at 25 fps).
        duration_jitter: clip duration factor bounds (SCE 4.2.1 *jitter*: (0.8, 1.2));
            None: no jitter (SCE's final choice).
        short_side: frames are resized so that their short side has this many pixels.
        crop_size: side of the square cut from the resized frames by the loader (a random
            position per training clip; the centre crop for the monitor) so that clips of
            different aspect ratios batch; None: the short side.
        num_clips: clips per training item (2: the two views of SCE 4.2).
        threads: decoder threads per video.
    """

    annotations: str | None = None
    fold: int = 1
    frames: int = 8
    duration_s: float = 2.56
    duration_jitter: tuple[float, float] | None = None
    short_side: int | None = 128
    crop_size: int | None = None
    num_clips: int = 2
    threads: int = 1


@dataclass(frozen=True)
class MultiCropSpec:
    """Multi-crop views (Denize et al. 2023, appendix D.2): 2 global crops plus local crops
    (queries only).

    Attributes:
        global_scale: random-resized-crop scale range of the global crops.
        local_sizes: output size of each local crop (one crop per entry).
        local_scales: scale range of each local crop.
        local_preset: augmentation preset of the local crops (SCE: ``strong_gamma``).
    """

    global_scale: tuple[float, float] = (0.2, 1.0)
    local_sizes: tuple[int, ...] = (192, 160, 128, 96)
    local_scales: tuple[tuple[float, float], ...] = (
        (0.172, 0.86), (0.143, 0.715), (0.114, 0.571), (0.086, 0.429),
    )
    local_preset: str = "strong_gamma"


@dataclass(frozen=True)
class VideoViewsSpec:
    """Views of clip batches (Denize et al. 2023, section 4.2.1 and appendix D.3); see
    :mod:`contrastkit.data.augment.views`.

    Each pretraining view is one clip of the item (view 0 from clip 0 under ``online``, view 1
    from clip 1 under ``target``), augmented with the same spatial parameters on every frame,
    then reversed in time with probability ``reverse_p`` and replaced by its RGB difference
    with probability ``rgb_difference_p`` (pretraining only). The colour strength is
    ``ViewsSpec.jitter_strength``, 1.0 for video when unset (SCE Table 15).

    Attributes:
        rgb_difference_p: probability of the RGB difference per clip (SCE Table 16: 0.2).
        reverse_p: probability of reversing the frame order per clip (SCE Table 16 tests 0.2
            and finds it harmful: default 0).
    """

    rgb_difference_p: float = 0.2
    reverse_p: float = 0.0


@dataclass(frozen=True)
class ViewsSpec:
    """How the two (or more) views of a batch are made, on the batch's device.

    Attributes:
        online: augmentation preset of view 0 (online branch); ``None``: the method's default.
        target: preset of view 1 (target branch, or the second online view); ``None``: default.
        size: output size of the global views.
        jitter_strength: colour-jitter strength multiplier (``None``: the preset's default).
        crop_scale: random-resized-crop scale range of the pretraining views (``None``: the
            preset's default, (0.2, 1.0) for SCE's presets, (0.08, 1.0) for SimCLR's).
        normalize: per-dataset normalisation name (``cifar10``, ``imagenet``...) or ``None``.
        eval_resize: evaluation views (kNN monitor): resize to ``size`` (small datasets) or
            resize to ``size * 256 / 224`` and centre-crop (large datasets).
        multicrop: extra local crops, for a method that takes more than two views (its
            ``supports_multicrop``; the engine refuses them for the others).
        video: clip views (batches of ``(B, T, C, H, W)`` clips, R3D backbones); None: images.
    """

    online: str | None = None
    target: str | None = None
    size: int = 32
    jitter_strength: float | None = None
    crop_scale: tuple[float, float] | None = None
    normalize: str | None = None
    eval_resize: Literal["small", "large"] = "small"
    multicrop: MultiCropSpec | None = None
    video: VideoViewsSpec | None = None
