"""View generators: turn one decoded uint8 batch into the list of augmented views of a method.

The views are made on the batch's device by :mod:`contrastkit.data.augment` presets:

* :class:`TwoViews` -- two views from two (possibly different) presets. SCE's default (SCE,
  Denize et al., section 4.1 and appendix D.1) is *strong* for the online branch and *weak* for
  the target branch (as ReSSL); its ImageNet study (appendix D.2) uses *strong-alpha* and
  *strong-beta*; SimCLR uses its own preset twice.
* :class:`MultiCrop` -- SCE appendix D.2 (after Hu et al., 2021): 2 global 224x224 views with
  crop scale (0.2, 1.0) and 4 local views of 192, 160, 128, 96 pixels with scales (0.172, 0.86),
  (0.143, 0.715), (0.114, 0.571), (0.086, 0.429), under *strong-gamma*.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from . import augment
from .augment._base import check_generator as _check_generator
from .augment._base import draw
from .augment._geometry import RandomResizedCropFlip
from .loader_crops import CropSpec

__all__ = [
    "MULTICROP_LOCAL_SCALES",
    "MULTICROP_LOCAL_SIZES",
    "VIEW_KINDS",
    "MultiCrop",
    "TwoViews",
    "make_views",
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
    (:mod:`contrastkit.data.loader_crops`); the crop step's horizontal flip (probability
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
