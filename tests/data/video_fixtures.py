"""Tiny synthetic videos written with PyAV for the video tests (shared, written once per run).

* :func:`ramp_frames`: frame ``t`` is uniformly gray with level ``20 + 4 t``, so a decoded
  frame's index is ``round((mean - 20) / 4)``.
* :func:`square_frames`: a red square moving one pixel per frame on a dark background; the
  direction of motion is the class (``DIRECTIONS``).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

av = pytest.importorskip("av")

#: (encoder, container extension) tried by the codec tests.
CODECS = (("libx264", "mp4"), ("mpeg4", "avi"), ("libvpx-vp9", "webm"))
DIRECTIONS = ("down", "left", "right", "up")
_QUALITY = {"libx264": {"crf": "8"}, "libvpx-vp9": {"crf": "8"}}


@functools.cache
def work_dir() -> Path:
    """A temporary folder for this test run, removed at exit."""
    path = Path(tempfile.mkdtemp(prefix="contrastkit-video-"))
    atexit.register(shutil.rmtree, path, True)
    return path


def write_video(
    path: Path, frames: np.ndarray, *, fps: int | Fraction = 25, codec: str = "libx264",
    gop: int = 8,
) -> Path:
    """Encode uint8 ``(T, H, W, 3)`` RGB frames with ``codec`` (key frame every ``gop``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    height, width = frames.shape[1:3]
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = gop
        stream.bit_rate = 4_000_000
        stream.options = dict(_QUALITY.get(codec, {}))
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


@functools.cache
def can_encode(codec: str) -> bool:
    """Whether the local PyAV build can encode with ``codec``."""
    ext = dict(CODECS).get(codec, "mp4")
    try:
        write_video(work_dir() / f"probe_{codec}.{ext}", ramp_frames(2, 16, 16), codec=codec)
    except Exception:  # any failure: codec absent or unusable
        return False
    return True


@functools.cache
def default_codec() -> tuple[str, str]:
    """The first usable (encoder, extension) among :data:`CODECS`."""
    for codec, ext in CODECS:
        if can_encode(codec):
            return codec, ext
    pytest.skip("this PyAV build encodes none of libx264, mpeg4, libvpx-vp9")
    raise AssertionError  # unreachable


def ramp_frames(num_frames: int, width: int = 64, height: int = 48) -> np.ndarray:
    """Gray frames whose level ``20 + 4 t`` encodes the frame number ``t``."""
    levels = 20 + 4 * np.arange(num_frames, dtype=np.int64)
    assert levels.max() <= 255
    return np.broadcast_to(levels[:, None, None, None], (num_frames, height, width, 3)).astype(
        np.uint8
    )


def frame_numbers(clip_thwc: np.ndarray) -> list[int]:
    """Frame numbers of decoded ramp frames ``(T, H, W, 3)``."""
    means = np.asarray(clip_thwc, dtype=np.float64).reshape(len(clip_thwc), -1).mean(axis=1)
    return [round((m - 20) / 4) for m in means]


def square_frames(direction: str, num_frames: int = 40, width: int = 64,
                  height: int = 48, side: int = 10) -> np.ndarray:
    """A red square moving one pixel per frame towards ``direction`` on a dark background."""
    frames = np.full((num_frames, height, width, 3), 30, np.uint8)
    dx, dy = {"right": (1, 0), "left": (-1, 0), "down": (0, 1), "up": (0, -1)}[direction]
    x0 = {1: 0, -1: width - side, 0: (width - side) // 2}[dx]
    y0 = {1: 0, -1: height - side, 0: (height - side) // 2}[dy]
    for t in range(num_frames):
        x = int(np.clip(x0 + dx * t, 0, width - side))
        y = int(np.clip(y0 + dy * t, 0, height - side))
        frames[t, y:y + side, x:x + side] = (220, 40, 40)
    return frames


def red_centroid(clip_tchw: np.ndarray) -> np.ndarray:
    """``(T, 2)`` (x, y) centroid of the red square in uint8 ``(T, 3, H, W)`` frames."""
    clip = np.asarray(clip_tchw, dtype=np.float64)
    mask = (clip[:, 0] > 150) & (clip[:, 1] < 100)
    ys, xs = np.mgrid[: clip.shape[2], : clip.shape[3]]
    count = mask.sum(axis=(1, 2))
    return np.stack([(mask * xs).sum(axis=(1, 2)) / count,
                     (mask * ys).sum(axis=(1, 2)) / count], axis=1)


@functools.cache
def squares_folder() -> Path:
    """``root/<direction>/clip{k}.<ext>``: 2 videos of 40 frames at 25 fps per direction."""
    codec, ext = default_codec()
    root = work_dir() / "squares"
    for direction in DIRECTIONS:
        for k in range(2):
            write_video(root / direction / f"clip{k}.{ext}",
                        square_frames(direction, 40 + 4 * k), codec=codec)
    return root


@functools.cache
def ramp_video(num_frames: int = 40, fps: int | Fraction = 25, codec: str | None = None,
               ext: str | None = None) -> Path:
    """A ramp video (see :func:`ramp_frames`), written once per argument set."""
    if codec is None:
        codec, ext = default_codec()
    if not can_encode(codec):
        pytest.skip(f"this PyAV build cannot encode {codec}")
    name = f"ramp_{num_frames}_{str(fps).replace('/', '-')}_{codec}.{ext}"
    return write_video(work_dir() / "ramps" / name, ramp_frames(num_frames), fps=fps,
                       codec=codec)
