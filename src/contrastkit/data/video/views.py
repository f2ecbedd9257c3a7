"""Views of clip batches (SCE, Denize et al. 2023, section 4.2.1 and appendix D.3), the video
counterpart of :mod:`contrastkit.data.views`.

* :class:`ClipView`: one pretraining view of a batch of clips: an image preset applied with the
  same random parameters on every frame of a clip (:class:`~contrastkit.data.video.VideoAugment`),
  then the clip reversed in time with probability ``reverse_p`` and replaced by its RGB
  difference with probability ``rgb_difference_p`` (SCE 4.2.1), laid out as
  ``(B, C, T, H, W)`` for the R3D backbones (:func:`to_backbone_layout`).
* :class:`VideoTwoViews`: view ``i`` from clip ``i`` of each video (online ``i = 0``, target
  ``i = 1``); the method receives ``[view_0, view_1]`` exactly as for images.
* :class:`VideoEvalView`: the image ``eval`` preset on every frame, no randomness, for the kNN
  monitor and evaluation.

Choice where SCE is silent: the RGB difference is taken after the per-dataset normalisation,
so the channel means cancel and the difference is zero-centred on the scale of the normalised
RGB input (``d_t = sum_c w_c (x_{c,t+1} - x_{c,t}) / std_c``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["ClipView", "VideoEvalView", "VideoTwoViews", "to_backbone_layout"]


def to_backbone_layout(clips: Tensor) -> Tensor:
    """``(B, T, C, H, W)`` -> contiguous ``(B, C, T, H, W)`` (the R3D input layout)."""
    if clips.dim() != 5:
        raise ValueError(f"clips must have shape (B, T, C, H, W), got {tuple(clips.shape)}")
    return clips.permute(0, 2, 1, 3, 4).contiguous()


class ClipView(nn.Module):
    """One pretraining view of a clip batch: preset (shared over frames), reverse, RGB diff.

    Args:
        preset: image preset name (``strong_alpha``, ``strong_beta``, ``eval``...).
        size: output side.
        rgb_difference_p: probability per clip of :func:`~contrastkit.data.video.rgb_difference`.
        reverse_p: probability per clip of reversing the frame order.
        **options: options of :func:`contrastkit.data.augment.preset` (``jitter_strength``,
            ``crop_scale``, ``normalize``, ``small``).

    Input uint8 (or float in [0, 1]) ``(B, T, C, H, W)``; output float ``(B, 3, T, size, size)``.
    """

    def __init__(self, preset: str, size: int, *, rgb_difference_p: float = 0.0,
                 reverse_p: float = 0.0, **options: object) -> None:
        super().__init__()
        from contrastkit.data import video

        if not 0.0 <= reverse_p <= 1.0:
            raise ValueError(f"views.video.reverse_p must be in [0, 1], got {reverse_p}")
        if not 0.0 <= rgb_difference_p <= 1.0:
            raise ValueError(
                f"views.video.rgb_difference_p must be in [0, 1], got {rgb_difference_p}")
        self.augment = video.video_preset(preset, size, **options)
        self.reverse_p = reverse_p
        self.difference = video.RandomRGBDifference(rgb_difference_p) if rgb_difference_p else None
        #: generator of the reversal draws (on the clips' device; None: the device's default)
        self.generator: torch.Generator | None = None

    def forward(self, clips: Tensor) -> Tensor:
        out = self.augment(clips)
        if self.reverse_p > 0:
            draws = torch.rand(out.shape[0], device=out.device, generator=self.generator)
            out = torch.where((draws < self.reverse_p).view(-1, 1, 1, 1, 1), out.flip(1), out)
        if self.difference is not None:
            out = self.difference(out)
        return to_backbone_layout(out)


class VideoTwoViews(nn.Module):
    """``[online(clip_0), target(clip_1)]`` of a batch of clip pairs.

    A batch ``[clips_0, clips_1]`` (two ``(B, T, C, H, W)`` tensors, as the training datasets
    give with ``num_clips=2``) makes view ``i`` from ``clips_i``; a single ``(B, T, C, H, W)``
    tensor makes both views from the same clips (spatial and colour augmentation only).
    """

    def __init__(self, online: ClipView, target: ClipView) -> None:
        super().__init__()
        self.online, self.target = online, target

    def forward(self, clips: Tensor | list[Tensor] | tuple[Tensor, ...]) -> list[Tensor]:
        if isinstance(clips, Tensor):
            clips = [clips, clips]
        if len(clips) != 2:
            raise ValueError(f"a video batch must hold 2 clips per video (data.video.num_clips "
                             f"= 2), got {len(clips)}")
        for c in clips:
            if not isinstance(c, Tensor) or c.dim() != 5:
                shape = tuple(c.shape) if isinstance(c, Tensor) else type(c).__name__
                raise ValueError(f"clips must be (B, T, C, H, W) tensors, got {shape}: set "
                                 "views.video only with a video dataset")
        return [self.online(clips[0]), self.target(clips[1])]


class VideoEvalView(nn.Module):
    """Deterministic view of clips for the monitor and evaluation: ``(B, C, T, S, S)`` floats.

    Args:
        size: output side through the image ``eval`` preset (``small``: resize to ``size``;
            otherwise resize to ``size * 256 / 224`` and centre-crop); None: frames keep
            their size (only scaled to [0, 1] and normalised), as for the 30-view evaluation
            whose crops are already cut by the dataset.
        small: image ``eval`` preset variant.
        normalize: normalisation name (or None).
    """

    def __init__(self, size: int | None, small: bool = True, normalize: str | None = None) -> None:
        super().__init__()
        from contrastkit.data import augment, video

        self.size = size
        if size is not None:
            self.frames: nn.Module = video.video_preset("eval", size, small=small,
                                                        normalize=normalize)
        else:  # no resize: [0, 1] scaling and normalisation only
            self.frames = augment.Pipeline([], 0, normalize)

    def forward(self, clips: Tensor) -> Tensor:
        if clips.dim() != 5 or clips.shape[2] not in (1, 3):
            raise ValueError(f"clips must have shape (B, T, 1|3, H, W), got {tuple(clips.shape)}")
        if self.size is not None:
            return to_backbone_layout(self.frames(clips))
        b, t = clips.shape[:2]
        flat = clips.flatten(0, 1)
        out = self.frames(flat if flat.dtype == torch.uint8 else flat.clone())
        return to_backbone_layout(out.view(b, t, *out.shape[1:]))
