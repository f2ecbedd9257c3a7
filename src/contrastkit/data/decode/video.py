"""Video decoding with PyAV: seek to a clip, decode only what is needed, resize the short side.

Frames are addressed by their *index* in presentation order, computed from the frame's
timestamp with the stream's real average frame rate and time base::

    index(frame) = round((frame.pts - stream.start_time) * time_base * average_rate)

so a clip of frames ``[lo, hi]`` is read by seeking (``container.seek`` on the video stream, in
``time_base`` units) to the key frame at or before ``lo`` and decoding until ``hi``. If a
demuxer lands after the requested frame, or frames carry no timestamp, the file is reopened and
decoded from its start (slower but exact).

Resizing uses libswscale through ``VideoFrame.reformat`` (bilinear filter with accurate rounding
and full chroma interpolation, while converting to RGB24),
so only the kept frames are converted and the full-resolution RGB frame is never materialised:
the short side becomes ``short_side`` and the long side ``round(long * short_side / short)``.

PyAV is the optional dependency group ``video`` (``pip install contrastkit[video]``).
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["VideoDecodeError", "VideoInfo", "VideoReader", "decode_frames", "probe_video"]

#: Two requested frame ranges closer than this many frames are decoded in one pass.
MERGE_GAP_FRAMES = 32


class VideoDecodeError(ValueError):
    """A video file could not be opened or decoded (unreadable, truncated or corrupt): an
    expected error of bad input (a ``ValueError``), printed in one line by the commands.

    ``VideoDecodeError(path, reason)``; ``VideoDecodeError(message)`` (how a ``DataLoader``
    worker's error is raised again in the main process) keeps the message as it is.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str | None = None) -> None:
        if reason is None:
            self.path = None
            super().__init__(str(path))
            return
        self.path = Path(path)
        super().__init__(f"cannot decode video {self.path}: {' '.join(reason.split())}")


def require_av() -> Any:
    """Import PyAV or raise an ``ImportError`` naming the extra to install."""
    try:
        import av
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "video decoding needs PyAV: pip install contrastkit[video]  (or: pip install av)"
        ) from err
    return av


@dataclass(frozen=True)
class VideoInfo:
    """Stream facts needed to address frames by index.

    Attributes:
        num_frames: Number of frames (container count, or demuxed packets when absent).
        fps: The video stream's real average frame rate.
        time_base: Seconds per ``pts`` unit of the stream.
        start_pts: ``pts`` of the first frame.
        width: Coded width in pixels.
        height: Coded height in pixels.
    """

    num_frames: int
    fps: Fraction
    time_base: Fraction
    start_pts: int
    width: int
    height: int


def resized_size(width: int, height: int, short_side: int | None) -> tuple[int, int]:
    """``(width, height)`` after scaling the short side to ``short_side`` (``None``: unchanged)."""
    if short_side is None:
        return width, height
    if short_side < 1:
        raise ValueError(f"short_side must be >= 1 or None, got {short_side}")
    scale = short_side / min(width, height)
    if width <= height:
        return short_side, max(1, round(height * scale))
    return max(1, round(width * scale)), short_side


def _merge_ranges(groups: list[list[int]]) -> list[tuple[int, int]]:
    """Cover the requested indices with few ``[lo, hi]`` ranges (merging near ones)."""
    ranges = sorted((min(g), max(g)) for g in groups if g)
    merged: list[list[int]] = []
    for lo, hi in ranges:
        if merged and lo <= merged[-1][1] + MERGE_GAP_FRAMES:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


class VideoReader:
    """An open video file from which clips (lists of frame indices) are decoded.

    Use as a context manager; one container is opened for all the clips of an item::

        with VideoReader(path, short_side=128) as reader:
            n = reader.info.num_frames
            clip = reader.read_clips([[0, 8, 16, 24]])[0]   # uint8 (4, H, W, 3)

    Args:
        path: Video file (mp4/H.264, avi/MPEG-4, webm/VP9, anything FFmpeg reads).
        short_side: Resize so the short side has this many pixels; ``None`` keeps the size.
        info: A cached :class:`VideoInfo` of this file, to skip probing.
        threads: Decoder threads (1 suits DataLoader workers).

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        VideoDecodeError: If the file cannot be opened or has no video stream.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        short_side: int | None = 128,
        info: VideoInfo | None = None,
        threads: int = 1,
    ) -> None:
        self.path = Path(path)
        self.short_side = short_side
        self.threads = threads
        self._av = require_av()
        flags = self._av.video.reformatter.Interpolation
        # bilinear filter; accurate rounding and full chroma interpolation keep flat colours
        # within 1-2 levels of the decoded full-size frame
        self._interpolation = flags.BILINEAR | flags.ACCURATE_RND | flags.FULL_CHR_H_INT
        if not self.path.is_file():
            raise FileNotFoundError(f"video file not found: {self.path}")
        self._container: Any = None
        self._open()
        self.info = info if info is not None else self._probe()
        self.size = resized_size(self.info.width, self.info.height, short_side)

    def _open(self) -> None:
        if self._container is not None:
            self._container.close()
        try:
            self._container = self._av.open(str(self.path))
            if not self._container.streams.video:
                raise VideoDecodeError(self.path, "no video stream")
            self._stream = self._container.streams.video[0]
            self._stream.codec_context.thread_count = self.threads
        except self._av.error.FFmpegError as err:
            self.close()
            raise VideoDecodeError(self.path, str(err)) from err

    def _probe(self) -> VideoInfo:
        stream = self._stream
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        if not rate or rate <= 0:
            raise VideoDecodeError(self.path, "the video stream has no frame rate")
        num_frames = int(stream.frames or 0)
        if num_frames <= 0:  # e.g. webm: count packets (demuxing only, no decoding)
            try:
                num_frames = sum(1 for p in self._container.demux(stream) if p.size)
            except self._av.error.FFmpegError as err:
                raise VideoDecodeError(self.path, str(err)) from err
            self._open()
            stream = self._stream
        if num_frames <= 0:
            raise VideoDecodeError(self.path, "the video stream has no frames")
        width, height = stream.codec_context.width, stream.codec_context.height
        if width <= 0 or height <= 0:
            raise VideoDecodeError(self.path, f"invalid frame size {width}x{height}")
        return VideoInfo(
            num_frames=num_frames,
            fps=Fraction(rate),
            time_base=Fraction(stream.time_base),
            start_pts=int(stream.start_time or 0),
            width=width,
            height=height,
        )

    def close(self) -> None:
        """Close the container (idempotent)."""
        if self._container is not None:
            self._container.close()
            self._container = None

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _to_rgb(self, frame: Any) -> np.ndarray:
        width, height = self.size
        return frame.to_ndarray(
            format="rgb24", width=width, height=height, interpolation=self._interpolation
        )

    def _decode_range(self, lo: int, hi: int, wanted: set[int], *, seek: bool) -> dict:
        """Decode frames ``lo..hi`` (presentation order) and keep the ``wanted`` ones."""
        info = self.info
        frames_per_pts = float(info.time_base * info.fps)
        if seek and lo > 0:
            target = info.start_pts + int(lo / frames_per_pts)
            self._container.seek(target, stream=self._stream, backward=True, any_frame=False)
        out: dict[int, np.ndarray] = {}
        sequential = -1
        for frame in self._container.decode(self._stream):
            if seek:
                if frame.pts is None:
                    return self._restart(lo, hi, wanted)
                index = round((frame.pts - info.start_pts) * frames_per_pts)
                if not out and index > lo and sequential < 0:
                    return self._restart(lo, hi, wanted)  # the seek overshot
            else:
                index = sequential + 1 if frame.pts is None else round(
                    (frame.pts - info.start_pts) * frames_per_pts)
            sequential = max(sequential, index)
            if index > hi:
                break
            if index in wanted and index not in out:
                out[index] = self._to_rgb(frame)
        return out

    def _restart(self, lo: int, hi: int, wanted: set[int]) -> dict:
        self._open()
        return self._decode_range(lo, hi, wanted, seek=False)

    def read_clips(self, clips: list[list[int]]) -> list[torch.Tensor]:
        """Decode several clips, each a list of frame indices (any order, repeats allowed).

        Near clips are decoded in one pass; far ones each after a seek. A frame missing inside
        the decoded range (variable frame rate, dropped frame) is replaced by the nearest
        decoded frame before it (after it at the start). If decoding stops more than one frame
        before the last requested index the file is truncated or corrupt and an error is raised
        (a one-frame shortfall is tolerated: container frame counts can be off by one).

        Args:
            clips: Frame index lists, each in ``[0, info.num_frames)``.

        Returns:
            One uint8 tensor ``(len(clip), H, W, 3)`` per clip, resized (see ``short_side``).

        Raises:
            ValueError: If an index is out of range.
            VideoDecodeError: If the file is truncated or cannot be decoded.
        """
        n = self.info.num_frames
        for clip in clips:
            bad = [i for i in clip if not 0 <= i < n]
            if bad:
                raise ValueError(f"frame indices {bad[:5]} out of range for {n} frames: "
                                 f"{self.path}")
        decoded: dict[int, np.ndarray] = {}
        wanted = {i for clip in clips for i in clip}
        try:
            for lo, hi in _merge_ranges(clips):
                part = {i for i in wanted if lo <= i <= hi}
                decoded.update(self._decode_range(lo, hi, part, seek=True))
        except self._av.error.FFmpegError as err:
            raise VideoDecodeError(self.path, str(err)) from err
        if not decoded:
            raise VideoDecodeError(self.path, "no frame could be decoded (truncated or corrupt)")
        have = sorted(decoded)
        if max(wanted) > have[-1] + 1:
            raise VideoDecodeError(
                self.path,
                f"truncated or corrupt: decoding stopped at frame {have[-1]} of {n} "
                f"(frame {max(wanted)} requested)",
            )
        for i in wanted - decoded.keys():
            pos = bisect.bisect_right(have, i)
            decoded[i] = decoded[have[pos - 1] if pos > 0 else have[0]]
        return [torch.from_numpy(np.stack([decoded[i] for i in clip])) for clip in clips]


def probe_video(path: str | os.PathLike[str]) -> VideoInfo:
    """Frame count, real frame rate, time base and size of a video file.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        VideoDecodeError: If the file cannot be opened.
    """
    with VideoReader(path, short_side=None) as reader:
        return reader.info


def decode_frames(
    path: str | os.PathLike[str], indices: list[int], *, short_side: int | None = 128
) -> torch.Tensor:
    """Decode the frames ``indices`` of a video as uint8 ``(T, H, W, 3)`` RGB.

    Args:
        path: Video file.
        indices: Frame indices in presentation order (see :func:`sample_clip_indices`).
        short_side: Short side after resizing (bilinear, libswscale); ``None`` keeps the size.

    Returns:
        uint8 tensor ``(len(indices), H, W, 3)``.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        VideoDecodeError: If the file is unreadable or truncated.
    """
    with VideoReader(path, short_side=short_side) as reader:
        return reader.read_clips([list(indices)])[0]
