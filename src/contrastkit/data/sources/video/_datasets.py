"""The video datasets: a clip sampler over annotated videos, and one class per dataset.

:class:`ClipDataset` samples clips as in SCE appendix D.3 (Denize et al. 2023; see
:mod:`contrastkit.data.sources.video._clip_sampling`); :class:`UCF101`, :class:`HMDB51`,
:class:`Kinetics` and :class:`VideoFolder` are an annotation reader
(:mod:`contrastkit.data.sources.video._annotations`) plus :class:`ClipDataset`.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from contrastkit.data.decode.video import VideoDecodeError, VideoInfo, VideoReader
from contrastkit.outputs import escape_line, record_skipped

from ._annotations import (
    read_hmdb51,
    read_kinetics,
    read_ucf101,
    read_video_folder,
)
from ._clip_sampling import ThreeCrop, clip_length, eval_clip_starts, sample_clip_indices

Item = tuple[torch.Tensor | list[torch.Tensor], int]


class ClipDataset(Dataset):
    """Clips of a list of labelled videos, sampled as in SCE appendix D.3.

    ``mode="train"``: each item is ``(clip, label)`` with ``clip`` uint8 ``(T, C, H, W)``, a
    random clip of ``duration_s`` seconds (times a jitter factor) at the stream's real frame
    rate from which ``frames`` frames are kept uniformly (:func:`sample_clip_indices`). With
    ``num_clips=k > 1`` the item is ``([clip_1, ..., clip_k], label)``, clips sampled
    independently from the same video (``num_clips=2``: the two pretraining views of SCE 4.2).

    ``mode="eval"``: each item is ``(views, label)`` with ``views`` uint8
    ``(eval_clips * 3, T, C, S, S)``: ``eval_clips`` (10) clips uniformly spaced in time
    (:func:`eval_clip_starts`, no jitter, no reversal) times the 3 crops of :class:`ThreeCrop`
    with ``S = crop_size`` or the frames' short side; view ``3 * clip + crop``. Average the 30
    predictions with :func:`average_views`.

    Frames are resized on the short side to ``short_side`` (bilinear, libswscale). Videos with
    different aspect ratios give frames of different widths: set ``crop_size`` to cut, in
    train mode, a random ``crop_size`` square (one position per clip, shared by its frames) so
    that default batching works. Videos shorter than a clip loop (indices wrap around).

    Unreadable, truncated or vanished videos: with ``skip_corrupt=False`` the error
    (:class:`VideoDecodeError` or ``FileNotFoundError``) names the file. With
    ``skip_corrupt=True`` a bad video is detected lazily when its item is loaded: it is added to
    :attr:`corrupt` (per process, so per DataLoader worker), a ``RuntimeWarning`` naming it and
    giving the running count is issued once for it, and the item is replaced by the next
    readable one (index + 1, + 2, ... cyclically) with that video's label; later accesses
    to it skip it silently (it is already counted). With :attr:`skip_log` set, each process
    also appends the skipped video to that file, which the main process reads back (the
    pretraining run lists them in its ``skipped_files.txt``). Files missing at construction
    are dropped with a single warning counting them (:attr:`missing`) when ``skip_corrupt`` is
    true, otherwise a ``FileNotFoundError`` names the first one and the count.

    Args:
        samples: ``(path, label)`` pairs.
        classes: Class names, ``classes[label]``.
        frames: Frames ``T`` kept per clip (8 or 16 in SCE).
        duration_s: Clip duration in seconds (2.56 s = 64 frames at 25 fps).
        jitter: Duration factor bounds, e.g. ``(0.8, 1.2)`` (SCE 4.2.1), or ``None``.
        reverse_p: Probability of reversing a training clip (SCE 4.2.1 *reverse*).
        num_clips: Clips per item in train mode.
        mode: ``"train"`` or ``"eval"``.
        short_side: Short side after resizing (``None``: original size).
        crop_size: Train: random square crop side (``None``: no crop). Eval: ThreeCrop side
            (``None``: the short side of the resized frames).
        eval_clips: Temporal clips in eval mode (10 in SCE).
        skip_corrupt: Skip bad videos (see above) instead of raising.
        generator: Random generator for sampling; ``None`` (recommended with DataLoader
            workers, which seed torch's global generator per worker) uses the global one.
        threads: Decoder threads per video.

    Raises:
        ValueError: On bad options (the option is named) or an empty sample list.
        FileNotFoundError: If videos are missing and ``skip_corrupt`` is false.
    """

    def __init__(
        self,
        samples: list[tuple[Path, int]],
        classes: list[str],
        *,
        frames: int = 8,
        duration_s: float = 2.56,
        jitter: tuple[float, float] | None = None,
        reverse_p: float = 0.0,
        num_clips: int = 1,
        mode: str = "train",
        short_side: int | None = 128,
        crop_size: int | None = None,
        eval_clips: int = 10,
        skip_corrupt: bool = False,
        generator: torch.Generator | None = None,
        threads: int = 1,
        missing: list[Path] | None = None,
    ) -> None:
        if mode not in ("train", "eval"):
            raise ValueError(f"mode must be 'train' or 'eval', got {mode!r}")
        for name, value in (("frames", frames), ("num_clips", num_clips),
                            ("eval_clips", eval_clips), ("threads", threads)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if crop_size is not None and crop_size < 1:
            raise ValueError(f"crop_size must be >= 1 or None, got {crop_size}")
        clip_length(25.0, duration_s)  # validates duration_s
        self.classes = list(classes)
        self.frames, self.duration_s, self.jitter = frames, duration_s, jitter
        self.reverse_p, self.num_clips, self.mode = reverse_p, num_clips, mode
        self.short_side, self.crop_size, self.eval_clips = short_side, crop_size, eval_clips
        self.skip_corrupt, self.generator, self.threads = skip_corrupt, generator, threads
        present: list[tuple[Path, int]] = []
        absent: list[Path] = []
        for path, label in samples:
            if Path(path).is_file():
                present.append((Path(path), label))
            else:
                absent.append(Path(path))
        self.missing: list[Path] = [Path(p) for p in missing or []] + absent
        if self.missing:
            message = (f"{len(self.missing)} of {len(self.missing) + len(present)} videos are "
                       f"missing (first: {self.missing[0]})")
            if absent and not skip_corrupt:
                raise FileNotFoundError(message + "; pass skip_corrupt=True to skip them")
            warnings.warn(message + "; they are skipped (see .missing)", RuntimeWarning,
                          stacklevel=3)
        if not present:
            raise ValueError("no video to load (the sample list is empty or all are missing)")
        self.samples: list[tuple[Path, int]] = present
        self.corrupt: list[Path] = []
        #: a file every process (DataLoader workers included) appends the videos it skips to,
        #: one escaped path a line (:func:`contrastkit.outputs.record_skipped`); None: none
        self.skip_log: str | None = None
        self._infos: dict[int, VideoInfo] = {}

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> Item:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} videos")
        for step in range(len(self)):
            i = (index + step) % len(self)
            path, label = self.samples[i]
            if path in self.corrupt:
                continue
            try:
                return self._load(i), label
            except (VideoDecodeError, FileNotFoundError) as err:
                if not self.skip_corrupt:
                    raise
                self.corrupt.append(path)
                record_skipped(self.skip_log, str(path))
                warnings.warn(
                    f"skip_corrupt: skipped unreadable video {escape_line(str(path))} "
                    f"({len(self.corrupt)} skipped so far in this process): "
                    f"{' '.join(str(err).split())}", RuntimeWarning, stacklevel=2)
        raise VideoDecodeError(self.samples[index][0], "no readable video left in the dataset")

    def _load(self, i: int) -> torch.Tensor | list[torch.Tensor]:
        path = self.samples[i][0]
        with VideoReader(path, short_side=self.short_side, info=self._infos.get(i),
                         threads=self.threads) as reader:
            info = self._infos[i] = reader.info
            fps = float(info.fps)
            if self.mode == "eval":
                length = clip_length(fps, self.duration_s)
                starts = eval_clip_starts(info.num_frames, length, self.eval_clips)
                indices = [sample_clip_indices(info.num_frames, fps, duration_s=self.duration_s,
                                               frames=self.frames, jitter=None, start=s)
                           for s in starts]
                clips = [_tchw(c) for c in reader.read_clips(indices)]
                three_crop = ThreeCrop(self.crop_size or min(clips[0].shape[-2:]))
                return torch.cat([three_crop(c) for c in clips])
            indices = [sample_clip_indices(info.num_frames, fps, duration_s=self.duration_s,
                                           frames=self.frames, jitter=self.jitter,
                                           generator=self.generator, reverse_p=self.reverse_p)
                       for _ in range(self.num_clips)]
            clips = [self._random_crop(_tchw(c)) for c in reader.read_clips(indices)]
        return clips[0] if self.num_clips == 1 else clips

    def _random_crop(self, clip: torch.Tensor) -> torch.Tensor:
        if self.crop_size is None:
            return clip
        s = self.crop_size
        height, width = clip.shape[-2:]
        if height < s or width < s:
            raise ValueError(f"crop_size={s} larger than the resized frames {height}x{width}")
        top = int(torch.randint(0, height - s + 1, (), generator=self.generator))
        left = int(torch.randint(0, width - s + 1, (), generator=self.generator))
        return clip[..., top:top + s, left:left + s].contiguous()


def _tchw(clip: torch.Tensor) -> torch.Tensor:
    """``(T, H, W, C)`` -> contiguous ``(T, C, H, W)``."""
    return clip.permute(0, 3, 1, 2).contiguous()


class UCF101(ClipDataset):
    """UCF101 clips (Soomro et al., 2012) from ``ucfTrainTestlist``; see :func:`read_ucf101`.

    Args:
        root: Folder ``<Class>/<video>.avi``.
        annotations: The ``ucfTrainTestlist`` folder.
        split: ``"train"`` or ``"test"``.
        fold: Official split 1, 2 or 3 (SCE 4.2.1 uses fold 1 for ablations).
        **options: :class:`ClipDataset` options (``frames``, ``mode``, ``num_clips``, ...).
    """

    def __init__(self, root: str | os.PathLike[str], annotations: str | os.PathLike[str],
                 split: str = "train", fold: int = 1, **options: Any) -> None:
        samples, classes = read_ucf101(root, annotations, split, fold)
        super().__init__(samples, classes, **options)


class HMDB51(ClipDataset):
    """HMDB51 clips (Kuehne et al., 2011) from ``testTrainMulti_7030_splits``.

    See :func:`read_hmdb51`; ``options`` as for :class:`ClipDataset`.
    """

    def __init__(self, root: str | os.PathLike[str], annotations: str | os.PathLike[str],
                 split: str = "train", fold: int = 1, **options: Any) -> None:
        samples, classes = read_hmdb51(root, annotations, split, fold)
        super().__init__(samples, classes, **options)


class Kinetics(ClipDataset):
    """Kinetics-400 or Mini-Kinetics-200 clips from an annotation CSV (Kay et al., 2017).

    See :func:`read_kinetics` for the CSV and folder layouts. Rows whose video is absent are
    counted, reported in one warning and listed in :attr:`missing`; they are never fatal.

    Args:
        root: Video folder (flat or ``<label>/`` sub-folders, optionally under ``<split>/``).
        csv: Annotation CSV (``label,youtube_id,time_start,time_end,split[,is_cc]``).
        split: Keep only rows of this ``split`` value (``None``: all).
        classes: Class names in label order (default: sorted labels of the CSV).
        **options: :class:`ClipDataset` options.
    """

    def __init__(self, root: str | os.PathLike[str], csv: str | os.PathLike[str],
                 split: str | None = None, classes: list[str] | None = None,
                 **options: Any) -> None:
        samples, names, missing = read_kinetics(root, csv, split, classes)
        super().__init__(samples, names, missing=missing, **options)


class VideoFolder(ClipDataset):
    """Clips of ``root/<class>/<video>`` files; classes are the sorted folder names.

    See :func:`read_video_folder`; ``options`` as for :class:`ClipDataset`.
    """

    def __init__(self, root: str | os.PathLike[str], **options: Any) -> None:
        samples, classes = read_video_folder(root)
        super().__init__(samples, classes, **options)
