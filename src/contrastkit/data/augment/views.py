"""The views of a batch: one decoded uint8 batch (images, or clips) -> the list of augmented
views a method trains on, made on the batch's device by the :mod:`contrastkit.data.augment`
presets; and the views a :class:`~contrastkit.data.specs.ViewsSpec` describes.

Images:

* :class:`TwoViews` -- two views from two (possibly different) presets. SCE's default (SCE,
  Denize et al., section 4.1 and appendix D.1) is *strong* for the online branch and *weak* for
  the target branch (as ReSSL); its ImageNet study (appendix D.2) uses *strong-alpha* and
  *strong-beta*; SimCLR uses its own preset twice.
* :class:`MultiCrop` -- SCE appendix D.2 (after Hu et al., 2021): 2 global 224x224 views with
  crop scale (0.2, 1.0) and 4 local views of 192, 160, 128, 96 pixels with scales (0.172, 0.86),
  (0.143, 0.715), (0.114, 0.571), (0.086, 0.429), under *strong-gamma*.
* Their random resized crops may be cut in the loader instead (:mod:`contrastkit.data.loading.
  crops`): :func:`loader_crop_specs` derives those crops from the spec, and ``from_crops``
  makes the views from them.

Clips (SCE, Denize et al. 2023, section 4.2.1 and appendix D.3):

* :class:`ClipView`: one pretraining view of a batch of clips: an image preset applied with the
  same random parameters on every frame of a clip
  (:class:`~contrastkit.data.augment.video.VideoAugment`), then the clip reversed in time with
  probability ``reverse_p`` and replaced by its RGB difference with probability
  ``rgb_difference_p`` (SCE 4.2.1), laid out as ``(B, C, T, H, W)`` for the R3D backbones
  (:func:`to_backbone_layout`).
* :class:`VideoTwoViews`: view ``i`` from clip ``i`` of each video (online ``i = 0``, target
  ``i = 1``); the method receives ``[view_0, view_1]`` exactly as for images.
* :class:`VideoEvalView`: the image ``eval`` preset on every frame, no randomness, for the kNN
  monitor and evaluation.

Choice where SCE is silent: the RGB difference is taken after the per-dataset normalisation,
so the channel means cancel and the difference is zero-centred on the scale of the normalised
RGB input (``d_t = sum_c w_c (x_{c,t+1} - x_{c,t}) / std_c``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from contrastkit.data import augment
from contrastkit.data.augment import video as clip_augment
from contrastkit.data.augment._base import check_generator as _check_generator
from contrastkit.data.augment._base import draw
from contrastkit.data.augment._geometry import RandomResizedCropFlip
from contrastkit.data.loading.crops import CropSpec
from contrastkit.data.specs import ViewsSpec

__all__ = [
    "MULTICROP_LOCAL_SCALES",
    "MULTICROP_LOCAL_SIZES",
    "VIDEO_JITTER_STRENGTH",
    "VIEW_KINDS",
    "ClipView",
    "MultiCrop",
    "TwoViews",
    "VideoEvalView",
    "VideoTwoViews",
    "build_eval_view",
    "build_train_views",
    "loader_crop_specs",
    "make_views",
    "to_backbone_layout",
]

#: Local crops of SCE appendix D.2 for 224x224 global views.
MULTICROP_LOCAL_SIZES: tuple[int, ...] = (192, 160, 128, 96)
MULTICROP_LOCAL_SCALES: tuple[tuple[float, float], ...] = (
    (0.172, 0.86), (0.143, 0.715), (0.114, 0.571), (0.086, 0.429),
)


def _shared_crop(online: nn.Module, target: nn.Module) -> bool:
    """Whether both views are pipelines starting with the same random resized crop."""
    if not (isinstance(online, augment.Pipeline) and isinstance(target, augment.Pipeline)):
        return False
    a, b = online.steps[0], target.steps[0]
    same = (type(a) is RandomResizedCropFlip and type(b) is RandomResizedCropFlip
            and (a.size, a.scale, a.ratio, a.flip_p) == (b.size, b.scale, b.ratio, b.flip_p))
    return same and online.chunk_pixels == target.chunk_pixels


def _crop_spec(pipeline: nn.Module) -> CropSpec:
    """The random resized crop a pretraining pipeline starts with, as a loader crop."""
    first = pipeline.steps[0] if isinstance(pipeline, augment.Pipeline) else None
    if not isinstance(first, RandomResizedCropFlip):
        raise ValueError(f"crops in the loader need views that start with a random resized "
                         f"crop, not {type(first or pipeline).__name__}: set data.crops: device")
    return CropSpec(first.size, tuple(first.scale), tuple(first.ratio))


def augment_crops(pipeline: augment.Pipeline, crops: Tensor) -> Tensor:
    """The rest of ``pipeline`` on crops its random resized crop would have made.

    ``crops`` are the uint8 ``(B, C, size, size)`` crops cut in the loader
    (:mod:`contrastkit.data.loading.crops`); the crop step's horizontal flip (probability
    ``flip_p``, from the pipeline's generator) and every later step run here, batched on the
    crops' device, with parameters drawn as :meth:`Pipeline.forward` draws them.

    Raises:
        ValueError: when the crops' side is not the crop step's output side.
    """
    augment.check_batch(crops)
    crop = pipeline.steps[0]
    if crops.shape[-2:] != (crop.size, crop.size):
        raise ValueError(f"loader crops of {crops.shape[-2]}x{crops.shape[-1]} for a "
                         f"{crop.size}x{crop.size} view")
    generator = pipeline.step_generator(0)
    _check_generator(generator, crops.device)
    flip = draw(crops.shape[0], 1, crops.device, generator)[:, 0] < crop.flip_p
    crop.last_params = {"flip": flip}
    params = pipeline.draw(crops.shape[0], crop.size, crop.size, crops.device, start=1)
    with torch.autocast(crops.device.type, enabled=False):
        x = augment.to_float_rgb(crops)
        x = torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)
    return pipeline.apply_params(x, params, start=1)


def _as_module(p: str | nn.Module, size: int | None, options: dict) -> nn.Module:
    if isinstance(p, nn.Module):
        return p
    if size is None:
        raise ValueError("size is required when a view is given by preset name")
    return augment.preset(p, size, **options)


class TwoViews(nn.Module):
    """Two augmented views of the same batch: ``[online(x), target(x)]``.

    When both views are :class:`~contrastkit.data.augment.Pipeline` s that start with the same
    random resized crop (size, scale, ratio, flip probability: SCE's *strong* / *weak*,
    SimCLR's two views), the two crops of a batch are drawn in one call (rows ``2b``: online,
    ``2b + 1``: target, from the online pipeline's generator) and made by one
    ``grid_sample``; each view then continues with its own ops and parameters. The result is
    distributed as two separate pipeline calls, with half the crop operators.

    Args:
        online: preset name or module for the first (online-branch) view.
        target: preset name or module for the second (target-branch) view.
        size: output side, required when a view is given by name.
        **options: passed to :func:`contrastkit.data.augment.preset` for named views.
    """

    def __init__(
        self, online: str | nn.Module, target: str | nn.Module, size: int | None = None,
        **options: object,
    ) -> None:
        super().__init__()
        self.online = _as_module(online, size, options)
        self.target = _as_module(target, size, options)

    def forward(self, x: Tensor) -> list[Tensor]:
        if not _shared_crop(self.online, self.target):
            return [self.online(x), self.target(x)]
        augment.check_batch(x)
        online, target = self.online, self.target
        crop = online.steps[0]
        batch, height, width = x.shape[0], x.shape[-2], x.shape[-1]
        generator = online.step_generator(0)
        _check_generator(generator, x.device)
        both = augment.sample_params(crop, 2 * batch, height, width, x.device, generator)
        online.steps[0].last_params = {k: v[0::2] for k, v in both.items()}
        target.steps[0].last_params = {k: v[1::2] for k, v in both.items()}
        size = crop.size
        with torch.autocast(x.device.type, enabled=False):
            crops = crop.apply(augment.to_float_rgb(x), both)  # (B, C, 2 size, size)
        views = []
        for i, pipeline in enumerate((online, target)):
            params = pipeline.draw(batch, size, size, x.device, start=1)
            views.append(pipeline.apply_params(crops[:, :, i * size : (i + 1) * size], params,
                                               start=1))
        return views

    def crop_specs(self) -> list[CropSpec]:
        """The two views' random resized crops, for crops cut in the loader."""
        return [_crop_spec(self.online), _crop_spec(self.target)]

    def from_crops(self, crops: Sequence[Tensor]) -> list[Tensor]:
        """The two views from their loader crops (one uint8 batch per view, in
        :meth:`crop_specs` order): each its own box, flip and colour draws."""
        _check_count(crops, 2)
        return [augment_crops(p, c) for p, c in zip((self.online, self.target), crops,
                                                    strict=True)]


def _check_count(crops: Sequence[Tensor], expected: int) -> None:
    if len(crops) != expected:
        raise ValueError(f"the batch holds {len(crops)} loader crops per image, the views need "
                         f"{expected}")


class MultiCrop(nn.Module):
    """Global and local views (SCE appendix D.2): ``[global_1, ..., global_G, local_1, ...]``.

    Args:
        global_size: side of the global views (224 in SCE).
        global_scale: crop scale range of the global views ((0.2, 1.0) in SCE).
        local_sizes: side of each local view (192, 160, 128, 96 in SCE).
        local_scales: crop scale range of each local view (same length as ``local_sizes``).
        num_global: number of global views (2 in SCE).
        preset: preset name of every view (``strong_gamma`` in SCE).
        global_presets: optional names for the global views, one each (e.g.
            ``("strong_alpha", "strong_beta")`` to keep the views of SCE without multi-crop);
            default: ``preset`` for all.
        **options: other options of :func:`contrastkit.data.augment.preset` (e.g. normalize).

    Raises:
        ValueError: mismatched ``local_sizes``/``local_scales`` or ``global_presets`` lengths,
            or ``num_global < 1``.
    """

    def __init__(
        self,
        global_size: int = 224,
        global_scale: tuple[float, float] = (0.2, 1.0),
        local_sizes: Sequence[int] = MULTICROP_LOCAL_SIZES,
        local_scales: Sequence[tuple[float, float]] = MULTICROP_LOCAL_SCALES,
        num_global: int = 2,
        preset: str = "strong_gamma",
        global_presets: Sequence[str] | None = None,
        **options: object,
    ) -> None:
        super().__init__()
        if isinstance(num_global, bool) or not isinstance(num_global, int) or num_global < 1:
            raise ValueError(f"num_global must be an int >= 1, got {num_global!r}")
        if len(local_sizes) != len(local_scales):
            raise ValueError(
                f"local_sizes ({len(local_sizes)}) and local_scales ({len(local_scales)}) "
                "must have the same length"
            )
        names = [preset] * num_global if global_presets is None else list(global_presets)
        if len(names) != num_global:
            raise ValueError(f"global_presets needs {num_global} names, got {len(names)}")
        if "crop_scale" in options:
            raise ValueError("crop_scale: use global_scale and local_scales for MultiCrop")
        self.global_views = nn.ModuleList(
            augment.preset(n, global_size, crop_scale=global_scale, **options) for n in names
        )
        self.local_views = nn.ModuleList(
            augment.preset(preset, s, crop_scale=sc, **options)
            for s, sc in zip(local_sizes, local_scales, strict=True)
        )

    def forward(self, x: Tensor) -> list[Tensor]:
        return [v(x) for v in self.global_views] + [v(x) for v in self.local_views]

    def crop_specs(self) -> list[CropSpec]:
        """Every view's random resized crop (global views first), for loader crops."""
        return [_crop_spec(v) for v in (*self.global_views, *self.local_views)]

    def from_crops(self, crops: Sequence[Tensor]) -> list[Tensor]:
        """The views from their loader crops (one uint8 batch per view, in
        :meth:`crop_specs` order)."""
        pipelines = (*self.global_views, *self.local_views)
        _check_count(crops, len(pipelines))
        return [augment_crops(p, c) for p, c in zip(pipelines, crops, strict=True)]


def _two(online: str, target: str) -> Callable[..., TwoViews]:
    return lambda size, **opts: TwoViews(online, target, size, **opts)


def _multicrop(size: int, **opts: object) -> MultiCrop:
    """SCE multi-crop scaled to ``size``: local sides ``round(l * size / 224)`` (min 8)."""
    locals_ = opts.pop("local_sizes", None)
    if locals_ is None:
        locals_ = tuple(max(8, round(s * size / 224)) for s in MULTICROP_LOCAL_SIZES)
    return MultiCrop(global_size=size, local_sizes=locals_, **opts)  # type: ignore[arg-type]


#: Kinds accepted by :func:`make_views`.
VIEW_KINDS = {
    "sce": _two("strong", "weak"),
    "ressl": _two("strong", "weak"),
    "sce_imagenet": _two("strong_alpha", "strong_beta"),
    "byol": _two("strong_alpha", "strong_beta"),
    "simclr": _two("simclr", "simclr"),
    "simclr_cifar": _two("simclr_cifar", "simclr_cifar"),
    "multicrop": _multicrop,
}


def make_views(kind: str, size: int, **opts: object) -> nn.Module:
    """Build the view generator ``kind`` for ``size x size`` (global) views.

    Args:
        kind: ``sce`` / ``ressl`` (strong online, weak target), ``sce_imagenet`` / ``byol``
            (strong-alpha, strong-beta), ``simclr``, ``simclr_cifar`` (the same preset twice),
            ``multicrop`` (SCE appendix D.2 with local sides scaled by ``size / 224``; pass
            ``local_sizes``, ``local_scales``, ``num_global``, ``preset``, ``global_presets``
            to change them).
        size: side of the (global) views.
        **opts: forwarded to :class:`TwoViews` / :class:`MultiCrop` (preset options such as
            ``normalize``, ``jitter_strength``, ``generator``).

    Returns:
        A module mapping a batch to a list of float view batches.

    Raises:
        ValueError: unknown ``kind`` (the message lists the allowed kinds) or bad options.
    """
    if kind not in VIEW_KINDS:
        raise ValueError(f"unknown view kind {kind!r}; allowed: {sorted(VIEW_KINDS)}")
    return VIEW_KINDS[kind](size, **opts)


# --- clips ------------------------------------------------------------------------------------
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
        rgb_difference_p: probability per clip of
            :func:`~contrastkit.data.augment.video.rgb_difference`.
        reverse_p: probability per clip of reversing the frame order.
        **options: options of :func:`contrastkit.data.augment.preset` (``jitter_strength``,
            ``crop_scale``, ``normalize``, ``small``).

    Input uint8 (or float in [0, 1]) ``(B, T, C, H, W)``; output float ``(B, 3, T, size, size)``.
    """

    def __init__(self, preset: str, size: int, *, rgb_difference_p: float = 0.0,
                 reverse_p: float = 0.0, **options: object) -> None:
        super().__init__()

        if not 0.0 <= reverse_p <= 1.0:
            raise ValueError(f"views.video.reverse_p must be in [0, 1], got {reverse_p}")
        if not 0.0 <= rgb_difference_p <= 1.0:
            raise ValueError(
                f"views.video.rgb_difference_p must be in [0, 1], got {rgb_difference_p}")
        self.augment = clip_augment.video_preset(preset, size, **options)
        self.reverse_p = reverse_p
        self.difference = (clip_augment.RandomRGBDifference(rgb_difference_p) if rgb_difference_p
                           else None)
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
        self.size = size
        if size is not None:
            self.frames: nn.Module = clip_augment.video_preset("eval", size, small=small,
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


# --- views from the config record --------------------------------------------------------------
#: Denize et al. 2023, Table 15: colour strength 1.0 is the best for video (the image presets
#: default to 0.5).
VIDEO_JITTER_STRENGTH = 1.0

ViewGenerator = Callable[[Tensor], list[Tensor]]


def _options(spec: ViewsSpec) -> dict:
    options: dict = {"normalize": spec.normalize}
    if spec.jitter_strength is not None:
        options["jitter_strength"] = spec.jitter_strength
    return options


def build_train_views(spec: ViewsSpec, default_presets: tuple[str, str]) -> ViewGenerator:
    """Views for pretraining: two (online, target) views, plus local crops if multi-crop; with
    ``spec.video``, the two clip views of a clip pair.

    Args:
        spec: the views config.
        default_presets: the method's (online, target) presets, used where ``spec`` has None
            (SCE's video setting, appendix D.3, is ``strong_alpha`` / ``strong_beta``).
    """
    online = spec.online or default_presets[0]
    target = spec.target or default_presets[1]
    options = _options(spec)
    if spec.video is not None:
        return _clip_views(spec, online, target)
    if spec.multicrop is None:
        if spec.crop_scale is not None:
            options["crop_scale"] = tuple(spec.crop_scale)
        return TwoViews(
            online=augment.preset(online, spec.size, **options),
            target=augment.preset(target, spec.size, **options),
        )
    mc = spec.multicrop
    if spec.crop_scale is not None:
        raise ValueError("views.crop_scale does not apply with multi-crop: set "
                         "views.multicrop.global_scale and local_scales instead")
    if len(mc.local_sizes) != len(mc.local_scales):
        raise ValueError(
            f"views.multicrop.local_sizes ({len(mc.local_sizes)} entries) and local_scales "
            f"({len(mc.local_scales)} entries) must have the same length"
        )
    return MultiCrop(
        global_size=spec.size,
        global_scale=mc.global_scale,
        local_sizes=mc.local_sizes,
        local_scales=mc.local_scales,
        preset=mc.local_preset,
        global_presets=(online, target),
        **options,
    )


def _clip_views(spec: ViewsSpec, online: str, target: str) -> VideoTwoViews:
    video = spec.video
    assert video is not None
    if spec.multicrop is not None:
        raise ValueError("views.multicrop does not apply to video (views.video is set)")
    options: dict = {"normalize": spec.normalize,
                     "jitter_strength": VIDEO_JITTER_STRENGTH if spec.jitter_strength is None
                     else spec.jitter_strength}
    if spec.crop_scale is not None:
        options["crop_scale"] = tuple(spec.crop_scale)
    make = [ClipView(name, spec.size, rgb_difference_p=video.rgb_difference_p,
                     reverse_p=video.reverse_p, **options) for name in (online, target)]
    return VideoTwoViews(*make)


def build_eval_view(spec: ViewsSpec) -> Callable[[Tensor], Tensor]:
    """Deterministic evaluation view (SCE appendix D.1/D.2 validation transform; clips: the
    image ``eval`` preset on every frame)."""
    small = spec.eval_resize == "small"
    if spec.video is not None:
        return VideoEvalView(spec.size, small=small, normalize=spec.normalize)
    return augment.preset("eval", spec.size, small=small, normalize=spec.normalize)


def loader_crop_specs(spec: ViewsSpec, default_presets: tuple[str, str]) -> list[CropSpec]:
    """The random resized crops of the pretraining views of ``spec``, in view order, for crops
    cut in the loader (``data.crops: loader``).

    Raises:
        ValueError: for clip views, or views that do not start with a random resized crop.
    """
    if spec.video is not None:
        raise ValueError("data.crops: loader cuts crops from image files; it does not apply to "
                         "clip views (views.video)")
    views = build_train_views(spec, default_presets)
    return views.crop_specs()  # type: ignore[union-attr]
