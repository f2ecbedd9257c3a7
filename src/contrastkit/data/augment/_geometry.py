"""Batched geometric augmentations: random resized crop (+ flip), random crop with padding, resize.

Internal to :mod:`contrastkit.data.augment`. Every op draws its parameters per sample **on the
batch's device**, in one ``torch.rand`` call per op, from the generator it is given (a
``torch.Generator`` on that device) or else from the device's default generator; nothing is
copied between host and device and no value is read back on the host, so a training step never
waits on the accelerator here. Each op keeps its last draw in ``last_params`` (tensors on the
batch's device) for inspection and tests. Parameter arithmetic runs in float64 (float32 on
devices without float64, e.g. MPS), pixels in the batch's dtype.

Design decisions, measured with ``benchmarks/augment_ops.py`` (aten operators dispatched per
call, counted with ``torch.profiler``; each is a kernel launch or more on a GPU):

* the crop + flip + resize is one bilinear ``grid_sample`` whose sampling grid is one
  ``addcmul`` of a cached base grid (``F.affine_grid`` builds the same grid with ~50 operators);
* per-sample choices are blends or ``torch.where`` masks over the whole batch instead of
  ``nonzero`` + gather + ``index_copy_`` round trips (each ``nonzero`` reads a count back on
  the host);
* constants (base grids, channel weights) are cached per device and dtype, never rebuilt from
  Python lists in a step (a host-to-device copy each time).

kornia's functional geometry is used where it is exact and not slower: ``warp_affine`` for the
padded crop of :class:`RandomCropPadFlip` (nearest, integer shifts, flip folded into the
matrix). Not used: ``warp_affine`` / ``crop_and_resize`` for the crop-resize (measured slower,
and kornia normalises and inverts the matrix in float32), ``resize`` (its
antialiasing is a Gaussian pre-blur, not the triangle filter of PIL / torch ``antialias=True``),
``center_crop`` (bilinear from a fractional origin where torchvision rounds the offset).
"""

from __future__ import annotations

import importlib
import math
from types import ModuleType

import torch
import torch.nn.functional as F
from torch import Tensor

from ._base import CONSTANTS, BatchOp, Params, draw, f64


def kornia_module(name: str) -> ModuleType:
    """``kornia.<name>``, imported on first use (kornia is the optional ``data`` extra)."""
    try:
        return importlib.import_module(f"kornia.{name}")
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "contrastkit's augmentations need kornia: pip install 'contrastkit[data]'"
        ) from err


def crop_boxes_from_uniforms(
    u: Tensor, height: int, width: int, scale: tuple[float, float], ratio: tuple[float, float],
    attempts: int = 10,
) -> Tensor:
    """Random-resized-crop boxes from uniforms, as torchvision's ``RandomResizedCrop`` draws them.

    ``u`` has at least ``2 A + 2`` columns (``A = attempts``; later columns are ignored). For each
    sample and attempt ``a`` the target area is ``t = H W (scale_lo + (scale_hi - scale_lo)
    u[:, a])`` and the log aspect ratio ``log r`` is uniform in ``log ratio`` (from
    ``u[:, A + a]``); ``w = round(sqrt(t r))``, ``h = round(sqrt(t / r))`` (computed as
    ``exp((log t +- log r) / 2)``). The first attempt with ``0 < w <= W`` and ``0 < h <= H`` is
    kept and placed at ``x0 = floor(u[:, 2A] (W - w + 1))``, ``y0 = floor(u[:, 2A + 1]
    (H - h + 1))``: uniform integer offsets. When no attempt fits, the whole image clipped to
    the ratio range, centred (``x0 = floor((W - w) / 2)``). Every step is a tensor operation;
    none reads a value back on the host.

    Returns:
        ``(batch, 4)`` tensor ``(x0, y0, w, h)`` in pixels of the input, in ``u``'s dtype.
    """
    batch = u.shape[0]
    area = float(height * width)
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    in_ratio = width / height
    if in_ratio < min(ratio):
        fallback = (float(width), float(round(width / min(ratio))))
    elif in_ratio > max(ratio):
        fallback = (float(round(height * max(ratio))), float(height))
    else:
        fallback = (float(width), float(height))
    key = (width, height, scale, ratio)
    low = CONSTANTS.get(("crop_low", *key), u,
                        lambda: f64([area * scale[0], log_lo]).view(2, 1))
    span = CONSTANTS.get(("crop_span", *key), u,
                         lambda: f64([area * (scale[1] - scale[0]), log_hi - log_lo]).view(2, 1))
    signs = CONSTANTS.get(("crop_signs",), u, lambda: f64([[0.5], [-0.5]]))
    ones = CONSTANTS.get(("crop_ones",), u, lambda: f64([[1.0], [1.0]]))
    limits = CONSTANTS.get(("crop_limits", width, height), u,
                           lambda: f64([float(width), float(height)]).view(2, 1))
    room = CONSTANTS.get(("crop_room", width, height), u,
                         lambda: f64([width + 1.0, height + 1.0]).view(2, 1))
    fallback_wh = CONSTANTS.get(("crop_fallback", *key), u, lambda: f64(fallback).view(2, 1))
    fallback_xy = CONSTANTS.get(("crop_fallback_xy", *key), u, lambda: f64(
        [(width - fallback[0]) // 2, (height - fallback[1]) // 2]).view(2, 1))
    columns = u.view(batch, -1, 1)
    # (B, 2, A): row 0 the target areas t, row 1 the log ratios; then w = sqrt(t) exp(log r / 2)
    # and h = sqrt(t) exp(-log r / 2).
    q = torch.addcmul(low, columns[:, : 2 * attempts].view(batch, 2, attempts), span)
    wh = torch.exp(q[:, 1:] * signs).mul_(q[:, :1].sqrt()).round_()
    fits = (torch.clamp(wh, ones, limits) == wh).all(dim=1)  # (B, A)
    found, first = fits.view(torch.uint8).max(dim=1, keepdim=True)  # first fitting attempt
    found = found.view(torch.bool).unsqueeze(2)
    wh = torch.where(found, wh.gather(2, first.unsqueeze(1).expand(batch, 2, 1)), fallback_wh)
    xy = columns[:, 2 * attempts : 2 * attempts + 2].mul(torch.sub(room, wh)).floor_()
    xy = torch.where(found, xy, fallback_xy)
    return torch.cat([xy, wh], dim=1).view(batch, 4)


def sample_crop_boxes(
    batch: int,
    height: int,
    width: int,
    scale: tuple[float, float],
    ratio: tuple[float, float],
    generator: torch.Generator | None = None,
    attempts: int = 10,
    device: torch.device | str = "cpu",
) -> Tensor:
    """Random-resized-crop boxes ``(batch, 4)`` ``(x0, y0, w, h)`` drawn on ``device``.

    ``attempts`` candidates per sample (torchvision: 10); see :func:`crop_boxes_from_uniforms`.
    """
    device = torch.device(device)
    u = draw(batch, 2 * attempts + 2, device, generator)
    return crop_boxes_from_uniforms(u, height, width, scale, ratio, attempts)


def _base_grid(size: int) -> Tensor:
    """``(size, size, 2)`` pixel-centre coordinates ``((2j + 1) / size - 1, (2i + 1) / size - 1)``
    (x = column j, y = row i): the ``align_corners=False`` grid of the whole image."""
    c = (torch.arange(size, dtype=torch.float64) * 2.0 + 1.0) / size - 1.0
    return torch.stack([c.expand(size, size), c[:, None].expand(size, size)], dim=-1)


def _affine_map(height: int, width: int) -> tuple[Tensor, Tensor]:
    """``(L, c)`` with ``(x0, y0, w, h) @ L + c = (scale_x, scale_y, shift_x, shift_y)``."""
    lin = torch.zeros(4, 4, dtype=torch.float64)
    lin[2, 0] = lin[2, 2] = 1.0 / width
    lin[3, 1] = lin[3, 3] = 1.0 / height
    lin[0, 2] = 2.0 / width
    lin[1, 3] = 2.0 / height
    return lin, f64([0.0, 0.0, -1.0, -1.0])


def crop_affine(boxes: Tensor, height: int, width: int, flip: Tensor | None = None) -> Tensor:
    """``(B, 4)``: per sample ``(scale_x, scale_y, shift_x, shift_y)`` of the sampling grid.

    Output pixel ``u`` of a box ``(x0, w)`` samples input position ``x0 + (u + 0.5) w / S`` (edge
    coordinates; half-pixel convention of PIL / torch ``interpolate``), which in ``grid_sample``'s
    normalised coordinates (``align_corners=False``) is ``shift + scale * base_u`` with
    ``base_u = (2u + 1) / S - 1``, ``scale = w / W`` and ``shift = (2 x0 + w) / W - 1`` (the same
    in y): one affine map of the box (``addmm``). A flip mirrors the grid: ``scale_x -> -scale_x``.
    """
    lin = CONSTANTS.get(("crop_lin", width, height), boxes, lambda: _affine_map(height, width)[0])
    const = CONSTANTS.get(("crop_const", width, height), boxes,
                          lambda: _affine_map(height, width)[1])
    affine = torch.mm(boxes, lin).add_(const)
    if flip is not None:
        signs = CONSTANTS.get(("flip_signs",), boxes, lambda: f64([[-1.0, 1.0, 1.0, 1.0]]))
        affine = torch.where(flip.view(-1, 1), affine * signs, affine)
    return affine


def resample_boxes(x: Tensor, boxes: Tensor, size: int, flip: Tensor | None = None) -> Tensor:
    """Crop every sample to its box and resize it to ``size x size``: one bilinear ``grid_sample``.

    Args:
        x: float batch ``(B, C, H, W)``.
        boxes: ``(V B, 4)`` ``(x0, y0, w, h)`` on ``x``'s device (see :func:`crop_affine`): ``V``
            boxes per sample (rows ``V b`` to ``V b + V - 1`` crop sample ``b``).
        size: output side.
        flip: optional ``(V B,)`` bool; flipped crops are mirrored left-right, folded into the
            sampling grid at no cost.

    Returns:
        ``(B, C, V size, size)``: the ``V`` crops of each sample stacked along the height (one
        ``grid_sample`` makes them all).

    Bilinear without antialiasing (torch ``grid_sample``, border padding): exact for upsampling
    crops; a crop much larger than ``size`` aliases, so decode large images near the final size.
    The grid is ``shift + scale * base`` (:func:`crop_affine`) in ``x``'s dtype.
    """
    batch, _, height, width = x.shape
    crops = boxes.shape[0]
    affine = crop_affine(boxes, height, width, flip).to(x.dtype)
    scale, shift = affine.view(crops, 1, 1, 2, 2).unbind(3)
    base = CONSTANTS.get(("base_grid", size), x, lambda: _base_grid(size))
    grid = torch.addcmul(shift, scale, base).view(batch, crops // batch * size, size, 2)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


class RandomResizedCropFlip(BatchOp):
    """Random resized crop to ``size`` followed by a horizontal flip with probability ``flip_p``.

    Both are done by one batched ``grid_sample`` (the flip mirrors the sampling grid), so the
    colour operations that follow run on ``size x size`` images. Parameters are drawn per sample
    in one call (see :func:`crop_boxes_from_uniforms`; 10 attempts as torchvision).
    ``last_params``: ``boxes`` ``(B, 4)`` and ``flip`` ``(B,)``.
    """

    attempts = 10

    def __init__(
        self,
        size: int,
        scale: tuple[float, float],
        ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
        flip_p: float = 0.5,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(generator)
        self.size, self.scale, self.ratio, self.flip_p = size, scale, ratio, flip_p

    def sample(self, batch, height, width, *, device="cpu", generator=None) -> Params:
        u = draw(batch, 2 * self.attempts + 3, torch.device(device), generator)
        boxes = crop_boxes_from_uniforms(u, height, width, self.scale, self.ratio, self.attempts)
        return {"boxes": boxes, "flip": u[:, -1] < self.flip_p}

    def output_hw(self, height: int, width: int) -> tuple[int, int]:
        return self.size, self.size

    def apply(self, x: Tensor, params: Params) -> Tensor:
        return resample_boxes(x, params["boxes"], self.size, params["flip"])


class RandomCropPadFlip(BatchOp):
    """Random ``size`` crop of the zero-padded image (``padding`` pixels per side), then flip.

    The small-dataset evaluation transform of SCE appendix D.1 (``RandomCrop(size, padding=4)`` +
    horizontal flip 0.5). An input whose side differs from ``size`` is first resized to ``size``
    (antialiased bilinear). Offsets are drawn per sample; one batched kornia ``warp_affine``
    (nearest, zero padding, integer shifts, flip folded into the matrix) does all crops.
    ``last_params``: ``offsets`` ``(B, 2)`` (x, y in the padded image, integers) and ``flip``
    ``(B,)``.
    """

    def __init__(
        self,
        size: int,
        padding: int = 4,
        flip_p: float = 0.5,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(generator)
        self.size, self.padding, self.flip_p = size, padding, flip_p

    def sample(self, batch, height, width, *, device="cpu", generator=None) -> Params:
        u = draw(batch, 3, torch.device(device), generator)
        offsets = u[:, :2].mul(2 * self.padding + 1).floor_().long()
        return {"offsets": offsets, "flip": u[:, 2] < self.flip_p}

    def output_hw(self, height: int, width: int) -> tuple[int, int]:
        return self.size, self.size

    def apply(self, x: Tensor, params: Params) -> Tensor:
        if min(x.shape[-2:]) != self.size:
            x = resize(x, self.size)
        return kornia_module("geometry.transform").warp_affine(
            x, self.matrices(params, x), (self.size, self.size), mode="nearest",
            padding_mode="zeros", align_corners=False,
        )

    def matrices(self, params: Params, x: Tensor) -> Tensor:
        """Source -> output pixel maps ``(B, 2, 3)`` of the crops, in ``x``'s dtype and device.

        Output pixel ``(u, v)`` reads input ``(ox + u - padding, oy + v - padding)`` (``ox, oy``:
        offsets in the padded image), so ``u = x - ox + padding``; a flip maps ``u`` to
        ``size - 1 - u``. All entries are integers: nearest sampling then copies pixels exactly,
        and samples outside the image read the zero padding.
        """
        offsets, flip = params["offsets"].to(x.dtype), params["flip"]
        tx = self.padding - offsets[:, 0]
        sign = 1.0 - 2.0 * flip.to(x.dtype)
        zeros = torch.zeros_like(tx)
        row0 = torch.stack([sign, zeros, torch.where(flip, self.size - 1 - tx, tx)], dim=1)
        row1 = torch.stack([zeros, zeros + 1.0, self.padding - offsets[:, 1]], dim=1)
        return torch.stack([row0, row1], dim=1)


def resize(x: Tensor, size: int) -> Tensor:
    """Resize the shorter side to ``size`` (antialiased bilinear); returns a new tensor."""
    height, width = x.shape[-2:]
    if min(height, width) == size:
        return x.clone()
    if height <= width:
        shape = (size, max(1, round(width * size / height)))
    else:
        shape = (max(1, round(height * size / width)), size)
    return F.interpolate(x, size=shape, mode="bilinear", align_corners=False, antialias=True)


def center_crop(x: Tensor, size: int) -> Tensor:
    """Central ``size x size`` crop (offsets rounded as torchvision's ``CenterCrop``)."""
    height, width = x.shape[-2:]
    if height < size or width < size:
        raise ValueError(f"center_crop: image {height}x{width} is smaller than size={size}")
    top = round((height - size) / 2.0)
    left = round((width - size) / 2.0)
    return x[..., top : top + size, left : left + size]


class ResizeCenterCrop(BatchOp):
    """Deterministic evaluation transform: resize the shorter side to ``resize_to``, centre crop."""

    def __init__(self, resize_to: int, size: int) -> None:
        super().__init__()
        self.resize_to, self.size = resize_to, size

    def output_hw(self, height: int, width: int) -> tuple[int, int]:
        return self.size, self.size

    def apply(self, x: Tensor, params: Params) -> Tensor:
        out = center_crop(resize(x, self.resize_to), self.size)
        return out.contiguous()
