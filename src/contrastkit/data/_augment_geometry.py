"""Batched geometric augmentations: random resized crop (+ flip), random crop with padding, resize.

Internal to :mod:`contrastkit.data.augment`. Every op draws its parameters per sample on the
CPU (from ``generator`` when given, else from torch's global CPU RNG) and moves them to the
batch's device, so a fixed seed gives the same parameters, hence the same views, on any device.
Each op keeps its last draw in ``last_params`` (tensors on the CPU) for inspection and tests.

kornia's functional geometry, op by op. Measured: kornia vs plain torch, CPU ms, one thread,
same run, 64x3x224x224 then 256x3x32x32 (``benchmarks/data_views.py --ops``, 2026-11-21, shared
2-core EPYC; rule: used if same semantics and at most 1.25x the torch op):

* kornia.geometry.transform.warp_affine: used by :class:`RandomCropPadFlip` (nearest, zero
  padding, integer shifts, flip folded into the matrix: bit-identical to the former pad + gather;
  measured 70.9 vs 115 ms, 3.14 vs 5.20 ms).
* kornia.geometry.transform.warp_affine / crop_and_resize: not used for :func:`resample_boxes`
  because slower (warp_affine measured 57.7 vs 36.0 ms, 5.14 vs 2.97 ms; crop_and_resize also
  solves a perspective system per box) and kornia builds the grid in the image dtype (matrix
  normalised and inverted in float32): samples move by up to 5e-5 versus the float64 grid here.
* kornia.geometry.transform.resize: not used because its ``antialias`` is a Gaussian pre-blur,
  not the triangle filter of PIL / torch ``antialias=True`` that :func:`resize` reproduces, and it
  truncates the long side (``int``) where torchvision rounds.
* kornia.geometry.transform.center_crop: not used because it warps bilinearly from the
  fractional origin ``(src - dst) / 2`` where torchvision rounds the offset, and is slower than a
  slice (measured 63.1 vs 4.30 ms, 5.95 vs 0.33 ms).
"""

from __future__ import annotations

import importlib
import math
from abc import ABC, abstractmethod
from types import ModuleType

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Params = dict[str, Tensor]


class BatchOp(nn.Module, ABC):
    """A batched op split in two: ``sample`` draws per-sample parameters, ``apply`` uses them.

    ``sample(batch, height, width)`` returns CPU tensors whose first dimension is the batch, so
    a pipeline can draw the whole batch's parameters once and apply them chunk by chunk (the
    result does not depend on the chunking). ``forward`` does both and keeps ``last_params``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.last_params: Params = {}

    def sample(self, batch: int, height: int, width: int) -> Params:
        return {}

    @abstractmethod
    def apply(self, x: Tensor, params: Params) -> Tensor:
        """Apply the op to ``x`` with parameters drawn by :meth:`sample`."""

    def output_hw(self, height: int, width: int) -> tuple[int, int]:
        return height, width

    def forward(self, x: Tensor) -> Tensor:
        self.last_params = self.sample(x.shape[0], x.shape[-2], x.shape[-1])
        return self.apply(x, self.last_params)


def kornia_module(name: str) -> ModuleType:
    """``kornia.<name>``, imported on first use (kornia is the optional ``data`` extra)."""
    try:
        return importlib.import_module(f"kornia.{name}")
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "contrastkit's augmentations need kornia: pip install 'contrastkit[data]'"
        ) from err


def uniform(n: int, low: float, high: float, generator: torch.Generator | None) -> Tensor:
    """``n`` float64 draws from U[low, high) on the CPU."""
    return low + (high - low) * torch.rand(n, generator=generator, dtype=torch.float64)


def bernoulli(n: int, p: float, generator: torch.Generator | None) -> Tensor:
    """``n`` booleans, True with probability ``p`` (always drawn: fixed RNG consumption)."""
    return torch.rand(n, generator=generator, dtype=torch.float64) < p


def sample_crop_boxes(
    batch: int,
    height: int,
    width: int,
    scale: tuple[float, float],
    ratio: tuple[float, float],
    generator: torch.Generator | None = None,
    attempts: int = 10,
) -> Tensor:
    """Random-resized-crop boxes, drawn per sample as torchvision's ``RandomResizedCrop`` does.

    For each sample, up to ``attempts`` candidates draw an area fraction ``s ~ U(scale)`` and a
    log-uniform aspect ratio ``r`` in ``ratio``; ``w = round(sqrt(s H W r))``,
    ``h = round(sqrt(s H W / r))``; the first candidate that fits in the image is kept and placed
    uniformly at random (integer offsets). When none fits, the fallback is the whole image clipped
    to the ratio range and centred. Vectorised: all candidates are drawn at once.

    Returns:
        ``(batch, 4)`` float64 tensor ``(x0, y0, w, h)`` in pixels of the input.
    """
    area = float(height * width)
    target = area * uniform(batch * attempts, scale[0], scale[1], generator)
    log_r = uniform(batch * attempts, math.log(ratio[0]), math.log(ratio[1]), generator)
    aspect = torch.exp(log_r)
    w = torch.round(torch.sqrt(target * aspect)).view(batch, attempts)
    h = torch.round(torch.sqrt(target / aspect)).view(batch, attempts)
    ok = (w > 0) & (w <= width) & (h > 0) & (h <= height)
    first = ok.to(torch.int8).argmax(dim=1, keepdim=True)
    w = w.gather(1, first).squeeze(1)
    h = h.gather(1, first).squeeze(1)
    found = ok.any(dim=1)
    in_ratio = width / height
    if in_ratio < min(ratio):
        fw, fh = float(width), float(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        fw, fh = float(round(height * max(ratio))), float(height)
    else:
        fw, fh = float(width), float(height)
    w = torch.where(found, w, torch.full_like(w, fw))
    h = torch.where(found, h, torch.full_like(h, fh))
    u = torch.rand(2, batch, generator=generator, dtype=torch.float64)
    x0 = torch.minimum(torch.floor(u[0] * (width - w + 1)), width - w)
    y0 = torch.minimum(torch.floor(u[1] * (height - h + 1)), height - h)
    x0 = torch.where(found, x0, torch.floor((width - w) / 2))
    y0 = torch.where(found, y0, torch.floor((height - h) / 2))
    return torch.stack([x0, y0, w, h], dim=1)


def _sampling_coords(start: Tensor, length: Tensor, full: int, out: int) -> Tensor:
    """grid_sample coordinates (align_corners=False) of ``out`` pixel centres spread over a box.

    Output pixel ``u`` samples input ``start + (u + 0.5) * length / out - 0.5`` (half-pixel
    convention of PIL / torch ``interpolate``), normalised to [-1, 1] over ``full`` pixels.
    """
    u = torch.arange(out, dtype=torch.float64) + 0.5
    pos = start[:, None] + u[None, :] * (length[:, None] / out)
    return pos * (2.0 / full) - 1.0


def resample_boxes(x: Tensor, boxes: Tensor, size: int, flip: Tensor | None = None) -> Tensor:
    """Crop every sample to its box and resize it to ``size x size``: one bilinear ``grid_sample``.

    Args:
        x: float batch ``(B, C, H, W)``.
        boxes: ``(B, 4)`` ``(x0, y0, w, h)`` on any device (CPU float64 preferred).
        size: output side.
        flip: optional ``(B,)`` bool; flipped samples are mirrored left-right, folded into the
            sampling grid at no cost.

    Bilinear without antialiasing (torch ``grid_sample``, border padding): exact for upsampling
    crops; a crop much larger than ``size`` aliases, so decode large images near the final size.
    """
    batch, _, height, width = x.shape
    gx = _sampling_coords(boxes[:, 0].cpu(), boxes[:, 2].cpu(), width, size)
    gy = _sampling_coords(boxes[:, 1].cpu(), boxes[:, 3].cpu(), height, size)
    if flip is not None:
        gx = torch.where(flip.cpu()[:, None], gx.flip(1), gx)
    gx = gx.to(device=x.device, dtype=x.dtype)
    gy = gy.to(device=x.device, dtype=x.dtype)
    grid = torch.stack(
        [gx[:, None, :].expand(batch, size, size), gy[:, :, None].expand(batch, size, size)], dim=-1
    )
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


class RandomResizedCropFlip(BatchOp):
    """Random resized crop to ``size`` followed by a horizontal flip with probability ``flip_p``.

    Both are done by one batched ``grid_sample`` (the flip mirrors the sampling grid), so the
    colour operations that follow run on ``size x size`` images. Parameters are drawn per sample
    (see :func:`sample_crop_boxes`). ``last_params``: ``boxes`` ``(B, 4)`` and ``flip`` ``(B,)``.
    """

    def __init__(
        self,
        size: int,
        scale: tuple[float, float],
        ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
        flip_p: float = 0.5,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.size, self.scale, self.ratio, self.flip_p = size, scale, ratio, flip_p
        self.generator = generator

    def sample(self, batch: int, height: int, width: int) -> Params:
        boxes = sample_crop_boxes(batch, height, width, self.scale, self.ratio, self.generator)
        return {"boxes": boxes, "flip": bernoulli(batch, self.flip_p, self.generator)}

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
    ``last_params``: ``offsets`` ``(B, 2)`` (x, y in the padded image) and ``flip`` ``(B,)``.
    """

    def __init__(
        self,
        size: int,
        padding: int = 4,
        flip_p: float = 0.5,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.size, self.padding, self.flip_p, self.generator = size, padding, flip_p, generator

    def sample(self, batch: int, height: int, width: int) -> Params:
        offsets = torch.randint(0, 2 * self.padding + 1, (batch, 2), generator=self.generator)
        return {"offsets": offsets, "flip": bernoulli(batch, self.flip_p, self.generator)}

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
        ``size - 1 - u``.
        All entries are integers: nearest sampling then copies pixels exactly, and samples
        outside the image read the zero padding.
        """
        offsets, flip = params["offsets"].to(torch.float64), params["flip"]
        tx = self.padding - offsets[:, 0]
        m = torch.zeros(offsets.shape[0], 2, 3, dtype=torch.float64)
        m[:, 0, 0] = torch.where(flip, -1.0, 1.0)
        m[:, 0, 2] = torch.where(flip, self.size - 1 - tx, tx)
        m[:, 1, 1] = 1.0
        m[:, 1, 2] = self.padding - offsets[:, 1]
        return m.to(device=x.device, dtype=x.dtype)


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
