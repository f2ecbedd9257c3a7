"""Configuration records of the data layer (validated by jsonargparse from YAML, see
``data.video`` in ``docs/configs.md``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["VideoDataSpec"]


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
