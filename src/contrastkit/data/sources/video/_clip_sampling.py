"""Where clips are taken, in time and space, for video pretraining and evaluation (SCE appendix
D.3): the temporal clip sampling and the three spatial crops (:class:`ThreeCrop`).

SCE (Denize et al., section 4.2 and appendix D.3) follows Feichtenhofer et al. (2021): a view is
a random clip lasting 2.56 s (64 frames at 25 fps) out of which ``T`` frames (8 or 16) are kept
uniformly. Section 4.2.1 adds two temporal augmentations: *jitter* (the clip duration is scaled
by a random factor in ``[0.8, 1.2]``) and *reverse* (the frame order is reversed with some
probability). Evaluation uses 10 temporal clips uniformly spaced over the video, each with 3
spatial crops (30 views), and averages the 30 predictions.

Everything here is pure (no I/O); randomness only comes from the ``generator`` argument
(``None`` uses torch's global generator, which ``DataLoader`` seeds differently per worker).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["ThreeCrop", "average_views", "clip_length", "eval_clip_starts",
           "sample_clip_indices"]


def clip_length(fps: float, duration_s: float) -> int:
    """Number of source frames covered by a clip of ``duration_s`` seconds at ``fps``.

    ``L = max(1, round(duration_s * fps))``; 2.56 s gives 64 frames at 25 fps, 77 at 30 fps.

    Args:
        fps: The stream's real frame rate (frames per second), > 0.
        duration_s: Clip duration in seconds, > 0.

    Returns:
        The clip length ``L`` in frames (at least 1).

    Raises:
        ValueError: If ``fps`` or ``duration_s`` is not a positive finite number.
    """
    if not (math.isfinite(fps) and fps > 0):
        raise ValueError(f"fps must be a positive finite number, got {fps!r}")
    if not (math.isfinite(duration_s) and duration_s > 0):
        raise ValueError(f"duration_s must be a positive finite number, got {duration_s!r}")
    return max(1, round(duration_s * fps))


def _uniform_positions(start: int, length: int, frames: int) -> list[int]:
    """``frames`` positions spread uniformly over ``[start, start + length)`` (stride L / T)."""
    return [start + (k * length) // frames for k in range(frames)]


def sample_clip_indices(
    num_frames_in_video: int,
    fps: float,
    *,
    duration_s: float = 2.56,
    frames: int = 8,
    jitter: tuple[float, float] | None = (0.8, 1.2),
    generator: torch.Generator | None = None,
    start: int | None = None,
    reverse_p: float = 0.0,
) -> list[int]:
    """Frame indices of one clip, as in SCE appendix D.3 and the temporal augmentations of 4.2.1.

    1. Duration jitter (SCE 4.2.1 *jitter*): ``d = duration_s * s`` with
       ``s ~ U(jitter[0], jitter[1])``, or ``s = 1`` when ``jitter`` is ``None``.
    2. Clip length in source frames: ``L = max(1, round(d * fps))`` (64 for 2.56 s at 25 fps).
    3. Start: ``start ~ U{0, ..., N - L}`` when the video has ``N >= L`` frames, else ``0``;
       a given ``start`` is used as is (evaluation clips, tests).
    4. Kept frames (uniform, stride ``L / T``): ``i_k = start + floor(k * L / T)`` for
       ``k = 0..T-1``; 64 frames and ``T = 8`` give a stride of 8 frames.
    5. Videos shorter than the clip loop: indices wrap around, ``i_k mod N``.
    6. Reversal (SCE 4.2.1 *reverse*): with probability ``reverse_p`` the order is reversed.

    Args:
        num_frames_in_video: Number of decodable frames ``N`` of the video, >= 1.
        fps: The stream's real average frame rate.
        duration_s: Nominal clip duration in seconds (2.56 in SCE).
        frames: Number of frames ``T`` kept from the clip (8 or 16 in SCE).
        jitter: ``(low, high)`` bounds of the duration factor, or ``None`` for no jitter.
            SCE tests ``(0.8, 1.2)``.
        generator: Random generator; ``None`` uses torch's global generator.
        start: First frame of the clip; random when ``None``.
        reverse_p: Probability of reversing the frame order (SCE tests 0.2; default off).

    Returns:
        ``frames`` frame indices in ``[0, N)`` in presentation order (or reversed).

    Raises:
        ValueError: On a non-positive ``num_frames_in_video``/``frames``, bad ``jitter`` bounds,
            ``reverse_p`` outside ``[0, 1]`` or a negative ``start``.
    """
    if num_frames_in_video < 1:
        raise ValueError(f"num_frames_in_video must be >= 1, got {num_frames_in_video}")
    if frames < 1:
        raise ValueError(f"frames must be >= 1, got {frames}")
    if not 0.0 <= reverse_p <= 1.0:
        raise ValueError(f"reverse_p must be in [0, 1], got {reverse_p}")
    if start is not None and start < 0:
        raise ValueError(f"start must be >= 0, got {start}")
    factor = 1.0
    if jitter is not None:
        low, high = jitter
        if not 0 < low <= high:
            raise ValueError(f"jitter must be (low, high) with 0 < low <= high, got {jitter}")
        u = torch.rand((), generator=generator, dtype=torch.float64).item()
        factor = low + (high - low) * u
    length = clip_length(fps, duration_s * factor)
    if start is None:
        room = num_frames_in_video - length
        start = int(torch.randint(0, room + 1, (), generator=generator)) if room > 0 else 0
    indices = [i % num_frames_in_video for i in _uniform_positions(start, length, frames)]
    if reverse_p > 0 and torch.rand((), generator=generator).item() < reverse_p:
        indices.reverse()
    return indices


def eval_clip_starts(num_frames: int, clip_len: int, num_clips: int = 10) -> list[int]:
    """Start frames of ``num_clips`` clips uniformly spaced over the video (SCE appendix D.3).

    ``start_j = round(j * (N - L) / (num_clips - 1))`` for ``j = 0..num_clips-1`` so that the
    first clip starts at frame 0 and the last one ends at the last frame. With one clip the
    centre clip ``floor((N - L) / 2)`` is used. Videos shorter than the clip (``N <= L``) give
    start 0 for every clip (the clip then loops, see :func:`sample_clip_indices`).

    Args:
        num_frames: Number of frames ``N`` in the video, >= 1.
        clip_len: Clip length ``L`` in source frames, >= 1 (see :func:`clip_length`).
        num_clips: Number of temporal clips (10 in SCE).

    Returns:
        ``num_clips`` non-decreasing start frames.

    Raises:
        ValueError: If any argument is smaller than 1.
    """
    for name, value in (("num_frames", num_frames), ("clip_len", clip_len),
                        ("num_clips", num_clips)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    room = max(num_frames - clip_len, 0)
    if num_clips == 1:
        return [room // 2]
    return [round(j * room / (num_clips - 1)) for j in range(num_clips)]


def average_views(features: torch.Tensor, views_per_video: int = 30) -> torch.Tensor:
    """Average predictions or features over the evaluation views of each video (SCE D.3).

    ``out_v = (1 / V) * sum_{j<V} features[v * V + j]`` where ``V = views_per_video``: rows must
    be grouped video by video, as produced by the ``mode="eval"`` datasets (30 views per video,
    clip-major: view ``3 * clip + crop``).

    Args:
        features: Float ``(num_videos * V, ...)`` tensor, rows grouped video by video.
        views_per_video: ``V`` (10 clips x 3 crops = 30 in SCE).

    Returns:
        ``(num_videos, ...)`` tensor of means.

    Raises:
        ValueError: If ``views_per_video < 1`` or the first dimension is not a multiple of it.
    """
    if views_per_video < 1:
        raise ValueError(f"views_per_video must be >= 1, got {views_per_video}")
    if features.shape[0] % views_per_video:
        raise ValueError(
            f"features has {features.shape[0]} rows, not a multiple of "
            f"views_per_video={views_per_video}"
        )
    grouped = features.reshape(-1, views_per_video, *features.shape[1:])
    return grouped.mean(dim=1)


class ThreeCrop(nn.Module):
    """Three ``size x size`` crops along the long side (SCE appendix D.3, 30-view evaluation).

    The crops are centred on the short side and placed at the start, centre and end of the long
    side: left / centre / right for landscape frames, top / centre / bottom for portrait ones
    (three identical crops for square frames of side ``size``). With frames short-side resized
    to ``size`` the three crops cover the whole frame, as in Feichtenhofer et al. (2019).

    Args:
        size: Crop side in pixels.

    Raises:
        ValueError: If ``size < 1``; at call time if a frame side is smaller than ``size``.
    """

    def __init__(self, size: int) -> None:
        super().__init__()
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.size = size

    def forward(self, clip: torch.Tensor) -> torch.Tensor:
        """Crop ``clip`` ``(..., H, W)`` (e.g. ``(T, C, H, W)``) into ``(3, ..., size, size)``."""
        height, width = clip.shape[-2:]
        s = self.size
        if height < s or width < s:
            raise ValueError(f"ThreeCrop size={s} larger than the frame {height}x{width}")
        if width >= height:
            top = (height - s) // 2
            lefts = (0, (width - s) // 2, width - s)
            crops = [clip[..., top:top + s, x:x + s] for x in lefts]
        else:
            left = (width - s) // 2
            tops = (0, (height - s) // 2, height - s)
            crops = [clip[..., y:y + s, left:left + s] for y in tops]
        return torch.stack(crops)

    def extra_repr(self) -> str:
        return f"size={self.size}"
