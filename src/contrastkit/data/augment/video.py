"""Video augmentations: RGB difference and clip-consistent image presets.

* :func:`rgb_difference` / :class:`RandomRGBDifference`: the *diff* temporal augmentation of
  SCE section 4.2.1 (grayscale frames subtracted over time, an approximation of the optical
  flow magnitude), applied with probability 0.2 during pretraining only.
* :class:`VideoAugment` / :func:`video_preset`: the image presets of
  :mod:`contrastkit.data.augment` (``strong_alpha``, ``strong_beta``, ... with
  ``jitter_strength``; SCE Tab. 15 finds strength 1.0 best for video) applied with the *same*
  random parameters on every frame of a clip (the presets' own batched torch ops replayed per
  frame, or kornia ``VideoSequential(same_on_frame=True)`` with ``backend="kornia"``).

Everything works batched on the tensors' device; kornia is imported only when asked for.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = [
    "LUMA_WEIGHTS",
    "RandomRGBDifference",
    "VideoAugment",
    "rgb_difference",
    "video_preset",
]

#: ITU-R BT.601 luma weights of R, G, B.
LUMA_WEIGHTS = (0.299, 0.587, 0.114)


def rgb_difference(clip: torch.Tensor) -> torch.Tensor:
    """RGB difference of a float clip (SCE section 4.2.1, *diff*).

    With the grayscale frames ``g_t = 0.299 R_t + 0.587 G_t + 0.114 B_t`` (ITU-R BT.601 luma),
    the difference is ``d_t = g_{t+1} - g_t`` for ``t < T - 1``; the last frame, which has no
    successor, repeats the previous difference, ``d_{T-1} = d_{T-2}`` (so every frame carries
    motion; a single-frame clip gives zeros). ``d_t`` is broadcast to the 3 channels so the
    result has the input's shape and can replace the RGB clip. Values lie in ``[-r, r]`` for an
    input in ``[0, r]``; no rescaling is done.

    Args:
        clip: Float tensor ``(..., T, C=3, H, W)``.

    Returns:
        Tensor of the same shape and dtype.

    Raises:
        ValueError: If ``clip`` is not floating point or has no ``(T, 3, H, W)`` trailing dims.
    """
    if not clip.is_floating_point():
        raise ValueError(f"clip must be a float tensor, got dtype {clip.dtype}")
    if clip.dim() < 4 or clip.shape[-3] != 3:
        raise ValueError(f"clip must have shape (..., T, 3, H, W), got {tuple(clip.shape)}")
    from ..augment._base import CONSTANTS, f64

    weights = CONSTANTS.get(("luma_video",), clip, lambda: f64(LUMA_WEIGHTS))
    gray = torch.einsum("...tchw,c->...thw", clip, weights)
    if gray.shape[-3] < 2:
        diff = torch.zeros_like(gray)
    else:
        forward = gray[..., 1:, :, :] - gray[..., :-1, :, :]
        diff = torch.cat([forward, forward[..., -1:, :, :]], dim=-3)
    return diff.unsqueeze(-3).expand_as(clip).contiguous()


class RandomRGBDifference(nn.Module):
    """Replace each clip of a batch by its :func:`rgb_difference` with probability ``p``.

    SCE section 4.2.1 applies it with ``p = 0.2`` to pretraining views only (evaluation sees
    RGB frames). The Bernoulli draws are made on the batch's device, one per clip.

    Args:
        p: Probability per clip, in ``[0, 1]``.
        generator: Optional generator (on the batch's device) for reproducible draws.

    Raises:
        ValueError: If ``p`` is outside ``[0, 1]``.
    """

    def __init__(self, p: float = 0.2, generator: torch.Generator | None = None) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p must be in [0, 1], got {p}")
        self.p = p
        self.generator = generator

    def forward(self, clips: torch.Tensor) -> torch.Tensor:
        """Apply to float ``clips`` ``(B, T, 3, H, W)``; returns the same shape."""
        if clips.dim() != 5:
            raise ValueError(f"clips must have shape (B, T, 3, H, W), got {tuple(clips.shape)}")
        draws = torch.rand(clips.shape[0], device=clips.device, generator=self.generator)
        chosen = (draws < self.p).view(-1, 1, 1, 1, 1)
        return torch.where(chosen, rgb_difference(clips), clips)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def video_preset(name: str, size: int, *, backend: str = "torch", **options: Any) -> VideoAugment:
    """The image preset ``name`` of :mod:`contrastkit.data.augment` for clips.

    Shorthand for :class:`VideoAugment`; e.g. ``video_preset("strong_alpha", 112,
    jitter_strength=1.0)`` (SCE 4.2.1, Tab. 15: colour strength 1.0 is best for video).
    """
    return VideoAugment(name, size, backend=backend, **options)


class VideoAugment(nn.Module):
    """Apply an image augmentation preset to clips with parameters shared by a clip's frames.

    Input uint8 (or float in [0, 1]) ``(B, T, C, H, W)`` on any device; output float
    ``(B, T, 3, size, size)`` on the same device. Each clip draws its own random parameters
    (crop box, flip, jitter factors and order, grayscale, blur sigma, solarize); all ``T``
    frames of the clip use the same ones, so a static video stays static.

    ``backend="torch"`` (default) reuses :func:`contrastkit.data.augment.preset` as is: one
    draw per clip on the clips' device (from ``generator`` or the device's default generator),
    applied to all ``B T`` frames as one batch
    (:meth:`~contrastkit.data.augment.Pipeline.forward_clips`).
    ``backend="kornia"`` wraps the ops of :func:`contrastkit.data.augment.kornia_preset` in
    ``kornia.augmentation.VideoSequential(data_format="BTCHW", same_on_frame=True)`` (only the
    ``jitter_strength`` option; kornia draws one colour-jitter order per batch).

    Args:
        name: Preset name (``weak``, ``strong``, ``strong_alpha``, ``strong_beta``, ...).
        size: Output side in pixels.
        backend: ``"torch"`` or ``"kornia"``.
        **options: Options of :func:`contrastkit.data.augment.preset` (``jitter_strength``,
            ``crop_scale``, ``normalize``, ``generator``).

    Raises:
        ValueError: On an unknown backend, or as raised by the preset for a bad name/option.
    """

    def __init__(self, name: str, size: int, *, backend: str = "torch", **options: Any) -> None:
        super().__init__()
        from contrastkit.data import augment

        self.name, self.size, self.backend = name, size, backend
        if backend == "torch":
            self.image = augment.preset(name, size, **options)
        elif backend == "kornia":
            unknown = set(options) - {"jitter_strength"}
            if unknown:
                raise ValueError(f"backend='kornia' supports only jitter_strength, got "
                                 f"{sorted(unknown)}")
            try:
                import kornia.augmentation as K
            except ImportError as err:  # pragma: no cover - depends on the environment
                raise ImportError("backend='kornia' needs kornia: pip install "
                                  "'contrastkit[data]'") from err
            ops = augment.kornia_preset(name, size, options.get("jitter_strength"))
            self.image = K.VideoSequential(*ops.children(), data_format="BTCHW",
                                           same_on_frame=True)
        else:
            raise ValueError(f"backend must be 'torch' or 'kornia', got {backend!r}")

    def forward(self, clips: torch.Tensor) -> torch.Tensor:
        """Augment ``clips`` ``(B, T, C, H, W)``; returns float ``(B, T, 3, size, size)``."""
        if clips.dim() != 5 or clips.shape[2] not in (1, 3):
            raise ValueError(f"clips must have shape (B, T, 1|3, H, W), got {tuple(clips.shape)}")
        if clips.dtype == torch.uint8:
            clips = clips.float().div_(255.0)
        elif not clips.is_floating_point():
            raise ValueError(f"clips must be uint8 or float in [0, 1], got {clips.dtype}")
        if self.backend == "kornia":
            return self.image(clips.expand(-1, -1, 3, -1, -1).contiguous())
        return self.image.forward_clips(clips)

    def extra_repr(self) -> str:
        return f"name={self.name!r}, size={self.size}, backend={self.backend!r}"
