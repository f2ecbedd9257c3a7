"""The random resized crops of the views, drawn from each full image in the loader worker.

SCE (Denize et al. 2023, Table 1, after BYOL) and DySTreSS (Manna et al. 2023, after SimCLR)
take every view's random resized crop from the whole image: area fraction uniform in
``scale``, log aspect ratio uniform in ``log ratio`` (3/4, 4/3), torchvision's sampler. With
:class:`LoaderCrops` the loader worker, per image:

1. reads the file's header (its size) and draws one box per view (:func:`crop_box`, the
   arithmetic of :func:`~contrastkit.data._augment_geometry.crop_boxes_from_uniforms` for one
   image, on uniforms drawn from a generator keyed by ``(seed, epoch, index)``);
2. decodes a JPEG at the smallest DCT scale (1/2, 1/4, 1/8: libjpeg's scaled decode) at which
   every box still has at least its view's side in both directions, so no view is upsampled
   by the reduction (other formats, and JPEGs the direct path rejects, through
   :func:`~contrastkit.data._images.decode_image`);
3. crops and resizes each box to its view's side in uint8 (Pillow's antialiased bilinear
   ``resize`` with a source box: what torchvision's ``RandomResizedCrop`` does on a PIL image).

The item is ``([view_1, ..., view_V], label)`` with ``view_v`` a uint8 ``(3, S_v, S_v)``
tensor; the flip and the colour, blur and solarisation steps stay batched on the device
(:meth:`contrastkit.data.views.TwoViews.from_crops`). The draws are a pure function of the
seed, the epoch and the sample index, not of the worker that reads it, so a resumed run, or a
run with another number of workers or processes, crops every image exactly as an
uninterrupted one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset, Sampler

from ._images import UnreadableImageError, decode_image, jpeg_header, pillow

__all__ = [
    "CropSpec",
    "EpochKeys",
    "FileReader",
    "LoaderCrops",
    "SampleReader",
    "crop_box",
    "crop_views",
    "file_reader",
    "file_samples",
]

#: Candidate boxes per view before the fallback (torchvision: 10).
ATTEMPTS = 10
DEFAULT_RATIO = (3.0 / 4.0, 4.0 / 3.0)


@dataclass(frozen=True)
class CropSpec:
    """One view's random resized crop: output side, area-fraction range and aspect-ratio range."""

    size: int
    scale: tuple[float, float]
    ratio: tuple[float, float] = DEFAULT_RATIO


def crop_box(u: Sequence[float], height: int, width: int, spec: CropSpec,
             attempts: int = ATTEMPTS) -> tuple[int, int, int, int]:
    """``(x0, y0, w, h)`` of one random resized crop from ``2 attempts + 2`` uniforms.

    The same arithmetic as the batched device sampler
    (:func:`~contrastkit.data._augment_geometry.crop_boxes_from_uniforms`), for one image in
    float64 Python scalars: attempt ``a`` has target area ``t = H W (lo + (hi - lo) u[a])`` and
    log ratio ``log r = log r_lo + (log r_hi - log r_lo) u[A + a]``; ``w = round(sqrt(t) e^{log
    r / 2})``, ``h = round(sqrt(t) e^{-log r / 2})`` (half to even); the first attempt with
    ``0 < w <= W`` and ``0 < h <= H`` is placed at ``x0 = floor(u[2A] (W - w + 1))``, ``y0 =
    floor(u[2A + 1] (H - h + 1))``; if none fits, the whole image clipped to the ratio range,
    centred.
    """
    area = float(height * width)
    lo, hi = spec.scale
    log_lo, log_hi = math.log(spec.ratio[0]), math.log(spec.ratio[1])
    for a in range(attempts):
        target = area * lo + u[a] * (area * (hi - lo))
        log_r = log_lo + u[attempts + a] * (log_hi - log_lo)
        root = math.sqrt(target)
        w = float(round(math.exp(0.5 * log_r) * root))
        h = float(round(math.exp(-0.5 * log_r) * root))
        if 1.0 <= w <= width and 1.0 <= h <= height:
            x0 = math.floor(u[2 * attempts] * (width + 1.0 - w))
            y0 = math.floor(u[2 * attempts + 1] * (height + 1.0 - h))
            return int(x0), int(y0), int(w), int(h)
    in_ratio = width / height
    if in_ratio < min(spec.ratio):
        w, h = float(width), float(round(width / min(spec.ratio)))
    elif in_ratio > max(spec.ratio):
        w, h = float(round(height * max(spec.ratio))), float(height)
    else:
        w, h = float(width), float(height)
    return int((width - w) // 2), int((height - h) // 2), int(w), int(h)


def dct_reduction(boxes: Sequence[tuple[int, int, int, int]], specs: Sequence[CropSpec]) -> int:
    """The largest JPEG DCT scale denominator ``s`` in (1, 2, 4, 8) at which every box keeps at
    least its view's side in both directions (``min(w, h) / s >= size``)."""
    room = min(min(b[2], b[3]) / spec.size for b, spec in zip(boxes, specs, strict=True))
    for s in (8, 4, 2):
        if room >= s:
            return s
    return 1


def _decode_reduced(data: bytes, scale: int) -> Any:
    """A Pillow image of a gray or 3-component JPEG decoded at ``1 / scale`` by libjpeg
    (``None`` when the direct path does not apply, as for ``decode_image``'s fast path)."""
    header = jpeg_header(data)
    if header is None or header[2] not in (1, 3) or 0 in header[:2]:
        return None
    image_mod = pillow()
    height, width, components = header
    if height * width > (image_mod.MAX_IMAGE_PIXELS or height * width):
        return None  # the general path applies Pillow's decompression-bomb limit
    mode = "L" if components == 1 else "RGB"
    size = (-(-width // scale), -(-height // scale))
    try:
        return image_mod.frombytes(mode, size, data, "jpeg", mode, "", scale)
    except (OSError, ValueError, SyntaxError):
        return None


def crop_views(data: bytes, name: str, specs: Sequence[CropSpec], uniforms: np.ndarray
               ) -> list[Tensor]:
    """Decode one encoded image and cut one random resized crop per view from it.

    Args:
        data: the encoded file.
        name: the file's name, for error messages.
        specs: one :class:`CropSpec` per view.
        uniforms: ``(len(specs), 2 ATTEMPTS + 2)`` uniforms in [0, 1), a row per view.

    Returns:
        One uint8 ``(3, size, size)`` tensor per view.

    Raises:
        UnreadableImageError: when the file cannot be decoded (naming it).
    """
    image_mod = pillow()
    header = jpeg_header(data)
    image = None
    if header is not None:
        height, width = header[:2]
        boxes = [crop_box(u, height, width, s) for u, s in zip(uniforms, specs, strict=True)]
        image = _decode_reduced(data, dct_reduction(boxes, specs))
    if image is None:
        array = decode_image(data, name)
        height, width = array.shape[1:]
        boxes = [crop_box(u, height, width, s) for u, s in zip(uniforms, specs, strict=True)]
        image = image_mod.fromarray(np.ascontiguousarray(array.transpose(1, 2, 0)))
    fx, fy = image.size[0] / width, image.size[1] / height
    views = []
    try:
        for (x0, y0, w, h), spec in zip(boxes, specs, strict=True):
            box = (x0 * fx, y0 * fy, (x0 + w) * fx, (y0 + h) * fy)
            crop = image.resize((spec.size, spec.size), image_mod.Resampling.BILINEAR, box=box)
            views.append(_chw(np.asarray(crop, dtype=np.uint8)))
    except (OSError, ValueError) as err:
        raise UnreadableImageError(
            f"{name}: unreadable image (expected a decodable JPEG/PNG/WebP file): {err}"
        ) from err
    return views


def _chw(array: np.ndarray) -> Tensor:
    if array.ndim == 2:
        array = np.broadcast_to(array[None], (3, *array.shape))
    else:
        array = array.transpose(2, 0, 1)
    return torch.from_numpy(np.ascontiguousarray(array))


class SampleReader(Protocol):
    """Random access to encoded images: ``len``, ``read(i) -> (bytes, name, label)``,
    ``classes`` and ``targets``."""

    classes: list[str]
    targets: list[int]

    def __len__(self) -> int: ...

    def read(self, index: int) -> tuple[bytes, str, int]: ...


class FileReader:
    """Encoded images from ``(path, label)`` pairs (an image folder's samples)."""

    def __init__(self, samples: Sequence[tuple[str, int]], classes: Sequence[str]) -> None:
        self.samples = [(str(p), int(y)) for p, y in samples]
        self.classes = list(classes)
        self.targets = [y for _, y in self.samples]

    def __len__(self) -> int:
        return len(self.samples)

    def read(self, index: int) -> tuple[bytes, str, int]:
        path, label = self.samples[index]
        with open(path, "rb") as f:
            return f.read(), path, label


def file_samples(dataset: Any) -> list[tuple[str, int]] | None:
    """The ``(path, label)`` of every item of an image-file dataset, in item order, seen
    through the class selection and subsets of :mod:`contrastkit.data.wrappers` and
    :mod:`contrastkit.data.longtail`; ``None`` when ``dataset`` is not made of image files
    (arrays, resized squares)."""
    samples = getattr(dataset, "samples", None)
    if samples is not None and hasattr(dataset, "fingerprint") and not hasattr(dataset,
                                                                               "dataset"):
        return [(str(p), int(y)) for p, y in samples]
    inner_ds, indices = getattr(dataset, "dataset", None), getattr(dataset, "indices", None)
    if inner_ds is None or indices is None:
        return None
    inner = file_samples(inner_ds)
    if inner is None:
        return None
    mapping = getattr(dataset, "mapping", None)
    if mapping is not None:
        return [(inner[i][0], mapping[inner[i][1]]) for i in indices]
    return [inner[i] for i in indices]


class LoaderCrops(Dataset):
    """Items ``([view crops], label)`` of encoded images, cropped in the loader (module doc).

    Args:
        reader: the encoded images (:class:`FileReader`, a shard reader).
        specs: one :class:`CropSpec` per view, in view order.
        seed: the run's data seed.

    ``ds[(index, epoch)]`` (keys from :class:`EpochKeys`) draws the view boxes from a NumPy
    generator seeded with ``(seed, epoch, index)``; ``ds[index]`` is epoch 0.
    """

    def __init__(self, reader: SampleReader, specs: Sequence[CropSpec], seed: int = 0) -> None:
        if not specs:
            raise ValueError("loader crops need at least one view")
        self.reader, self.specs, self.seed = reader, list(specs), int(seed)
        self.classes = list(reader.classes)
        self.targets = list(reader.targets)

    def __len__(self) -> int:
        return len(self.reader)

    def uniforms(self, index: int, epoch: int) -> np.ndarray:
        """The ``(views, 2 ATTEMPTS + 2)`` uniforms of sample ``index`` in ``epoch``."""
        rng = np.random.default_rng([self.seed % 2**63, int(epoch), int(index)])
        return rng.random((len(self.specs), 2 * ATTEMPTS + 2))

    def __getitem__(self, key: int | tuple[int, int]) -> tuple[list[Tensor], int]:
        index, epoch = key if isinstance(key, tuple) else (key, 0)
        data, name, label = self.reader.read(index)
        return crop_views(data, name, self.specs, self.uniforms(index, epoch)), label


class EpochKeys(Sampler[tuple[int, int]]):
    """Wrap an index sampler with ``set_epoch``: yields ``(index, epoch)`` keys for
    :class:`LoaderCrops` (the workers do not see the main process's epoch otherwise)."""

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Select ``epoch`` (forwarded to the wrapped sampler)."""
        self.epoch = epoch
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __iter__(self):
        epoch = self.epoch
        return ((int(i), epoch) for i in self.sampler)

    def __len__(self) -> int:
        return len(self.sampler)


def file_reader(dataset: Any) -> FileReader:
    """A :class:`FileReader` over the image files of ``dataset`` (see :func:`file_samples`).

    Raises:
        ValueError: when ``dataset`` is not made of image files.
    """
    samples = file_samples(dataset)
    if samples is None:
        raise ValueError(
            f"crops in the loader need image files (dataset folder, imagenet100, tinyimagenet "
            f"or shards), not {type(dataset).__name__}: set data.crops: device")
    return FileReader(samples, getattr(dataset, "classes", []))

